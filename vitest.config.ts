import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    // The container tests build an image (minutes): `npm run test:container` (vitest.container.config.ts).
    exclude: [...configDefaults.exclude, "test/container/**"],
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
