import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Fails the run when a test leaves a file in the checkout.
    globalSetup: ["test/support/checkout-clean.ts"],
    // In forks so native engines stay isolated. Three workers on two cores: much of the suite's time is spent
    // waiting (spawned CLIs starting, retry windows, timers, Chromium, S3), which two workers left idle (docs/development.md).
    pool: "forks",
    maxWorkers: 3,
    testTimeout: 30_000,
    // One llama.cpp thread per engine (inherited by the CLIs the tests spawn): several test files run at once,
    // and spinning threads on an oversubscribed CPU run many times slower.
    env: { TYPED_EVAL_THREADS: "1" },
  },
});
