import { defineConfig } from "vitest/config";
import { SLOW_SUITE_TESTS } from "./test/support/test-suites.js";

/**
 * `npm run test:components`: the tests that bring a heavy component of their own (a second broker,
 * Apicurio, Chromium, Zipkin), run the real default model at length, or play a long multi-process
 * scenario (kills, resumes, a group, a model switch); test/support/test-suites.ts says which and why. The same global setup as `npm test`: one shared broker, dist/ built once.
 */
export default defineConfig({
  test: {
    include: SLOW_SUITE_TESTS,
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    poolOptions: { forks: { maxForks: 2 } },
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
