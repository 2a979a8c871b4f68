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
stopWithNpm();
await import(main);

/**
 * `npx sluice serve`, `npm exec` and `npm start` run this file through `sh -c`: npm → sh → node. On
 * SIGTERM npm signals the shell, which exits without passing the signal on, so node would live on
 * orphaned and keep consuming. When npm started us (it sets `npm_command`), losing the parent process
 * is therefore treated as SIGTERM: the command's own handler stops gracefully (serve: finish in-flight
 * batches, commit, leave the group). Started any other way, nothing changes (`nohup sluice serve &`
 * keeps running after its shell exits).
 */
function stopWithNpm() {
  if (process.env.npm_command === undefined) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    try {
      process.kill(parent, 0); // signal 0: only asks whether the process exists
    } catch (error) {
      if (error.code !== "ESRCH") return; // EPERM: it exists
      clearInterval(timer);
      process.kill(process.pid, "SIGTERM");
    }
  }, 500);
  timer.unref();
}
