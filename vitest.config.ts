import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    // The secured-broker tests have their own run (npm run test:secure, vitest.secure.config.ts).
    exclude: [...configDefaults.exclude, "test/secure/**"],
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
