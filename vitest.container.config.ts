import { defineConfig } from "vitest/config";

// `npm run test:container`: the production image built and run with podman (slow; `.ci/run` runs it
// after `npm test` where podman is available or installable). Kafka comes from the same global setup
// as `npm test` (KAFKA_BROKERS, else a broker the setup starts and stops).
export default defineConfig({
  test: {
    include: ["test/container/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 1_200_000,
  },
});
