/**
 * A test-only `sluice` entry: `node --import tsx test/support/sluice-with-seams.ts --seams '<json>' ARGS…`
 * installs the batch test seams described by the JSON (a BatchSeamSpec) in this process, then runs the
 * normal CLI with ARGS. The production binary has no test hooks; only this entry can install seams.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { installBatchSeams } from "../../src/app/batch-seams.js";
import { packageRoot } from "../../src/config/project-paths.js";
import { type BatchSeamSpec, batchSeams } from "./batch-seams.js";

const [, , flag, json, ...args] = process.argv;
if (flag !== "--seams" || json === undefined) {
  process.stderr.write("usage: sluice-with-seams.ts --seams '<json>' [sluice args…]\n");
  process.exit(2);
}
installBatchSeams(batchSeams(JSON.parse(json) as BatchSeamSpec));
process.argv = [process.argv[0]!, process.argv[1]!, ...args];
// Loaded by path, like a process would run it: test code does not import the CLI.
await import(pathToFileURL(join(packageRoot(), "src", "cli", "main.ts")).href);
