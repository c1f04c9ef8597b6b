import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Two cores: one worker per core, in forks so native engines stay isolated.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
  },
});
