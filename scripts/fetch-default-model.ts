// Fetches the default model into a directory (the Dockerfile's model stage runs it with tsx, so the
// model layer only depends on these few sources and stays cached while the rest of src/ changes).
// Usage: node --import tsx scripts/fetch-default-model.ts DIR
import { ensureDefaultModel } from "../src/model/default-model.js";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: fetch-default-model.ts DIR");
  process.exit(2);
}
const files = await ensureDefaultModel({ modelsDir: dir, log: (line) => console.log(line) });
console.log(`default model in ${files.modelPath}`);
