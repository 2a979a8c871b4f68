#!/usr/bin/env node
// Thin launcher: the CLI lives in src/cli and is compiled to dist/ by `npm run build`
// (run automatically by `npm install` through the `prepare` script).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("../dist/src/cli/main.js", import.meta.url));
if (!existsSync(main)) {
  console.error("sluice: dist/ is missing. Run `npm run build` (or `npm install`) first.");
  process.exit(1);
}
await import(main);
