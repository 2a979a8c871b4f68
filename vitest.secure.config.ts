import { defineConfig } from "vitest/config";

/**
 * `npm run test:secure`: tests against the secured local broker (test/secure/secure-setup.ts starts
 * it once). Kept out of `npm test`; `.ci/run` runs it right after.
 */
export default defineConfig({
  test: {
    include: ["test/secure/**/*.test.ts"],
    globalSetup: ["test/secure/secure-setup.ts"],
    pool: "forks",
    // One file at a time: the files share one broker and the machine's 2 cores.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
