import { configDefaults, defineConfig } from "vitest/config";
import { CPU_TESTS, SLOW_SUITE_TESTS } from "./test/support/test-suites.js";

/**
 * `npm test`'s vitest run: two projects, each in its own pool, running side by side.
 *   - unit: test/unit (no broker), in worker threads;
 *   - kafka: test/integration and test/e2e against the one broker of the global setup (which also
 *     builds dist/ for the CLI processes), in forked processes, several files at a time: these
 *     tests mostly wait on the broker and on the processes they start.
 * Own runs: the component and scenario tests (`npm run test:components`, test/support/test-suites.ts), the
 * container tests (`npm run test:container`: they build an image) and the secured-broker tests
 * (`npm run test:secure`: their own broker).
 */
export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    poolOptions: {
      threads: { maxThreads: 2 },
      forks: { maxForks: 3 },
    },
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts", "src/**/*.test.ts"],
          pool: "threads",
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          name: "kafka",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...SLOW_SUITE_TESTS, ...CPU_TESTS],
          pool: "forks",
          // Files share the cores, so a test takes longer than alone; tests set their own where it matters.
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
