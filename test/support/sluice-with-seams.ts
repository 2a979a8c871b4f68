/**
 * A test-only `sluice` entry: `node --import tsx test/support/sluice-with-seams.ts --seams '<json>' ARGS…`
 * installs the batch test seams described by the JSON (a BatchSeamSpec) in this process, then runs the
 * normal CLI with ARGS. The production binary has no test hooks; only this entry can install seams.
 * Both come from the built dist/ (./built-cli.ts), the CLI every other test runs, so the seams land in
 * the module instance that CLI reads.
 */
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as BatchSeamsModule from "../../src/app/batch-seams.js";
import { type BatchSeamSpec, batchSeams } from "./batch-seams.js";
import { builtCli } from "./built-cli.js";

const [, , flag, json, ...args] = process.argv;
if (flag !== "--seams" || json === undefined) {
  process.stderr.write("usage: sluice-with-seams.ts --seams '<json>' [sluice args…]\n");
  process.exit(2);
}
const main = builtCli();
const distSeams = pathToFileURL(join(dirname(main), "..", "app", "batch-seams.js")).href;
const { installBatchSeams } = (await import(distSeams)) as typeof BatchSeamsModule;
installBatchSeams(batchSeams(JSON.parse(json) as BatchSeamSpec));
process.argv = [process.argv[0]!, process.argv[1]!, ...args];
// Loaded by path, like a process would run it: test code does not import the CLI.
await import(pathToFileURL(main).href);
