import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    // Own runs: the container tests build an image (minutes; `npm run test:container`), the
    // secured-broker tests start their own broker (`npm run test:secure`).
    exclude: [...configDefaults.exclude, "test/container/**", "test/secure/**"],
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
