import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Fails the run when a test leaves a file in the checkout; starts Ceph RGW when a test file asks for the real S3 store.
    globalSetup: ["test/support/checkout-clean.ts", "test/support/rgw-setup.ts"],
    // Two cores: one worker per core, in forks so native engines stay isolated.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    // Two test files run at once: one llama.cpp thread each (inherited by the CLIs the tests spawn),
    // since spinning threads on an oversubscribed CPU run many times slower.
    env: { TYPED_EVAL_THREADS: "1" },
  },
});
