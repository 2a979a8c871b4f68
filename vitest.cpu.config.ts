import { defineConfig } from "vitest/config";
import { CPU_TESTS } from "./test/support/test-suites.js";

/**
 * `npm run test:cpu`: the tests that measure how the CPU is shared (test/support/test-suites.ts,
 * CPU_TESTS), one file at a time so no other test competes for the machine's cores. The same global
 * setup as `npm test`: one shared broker, dist/ built once.
 */
export default defineConfig({
  test: {
    include: CPU_TESTS,
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
