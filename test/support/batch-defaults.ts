import type { BatchJobOptions } from "../../src/batch/batch-job.js";
import { maxBatchSize, sluiceConfigSchema } from "../../src/config/index.js";
import { FileSource, type FileSourceOptions, fileFormatOf } from "../../src/runs/file-source.js";

/**
 * What `sluice batch` resolves for a default configuration and no flags, read from the config schema
 * (the one home of those defaults) and the domain's own rules, so tests do not restate them.
 */
const defaults = sluiceConfigSchema.parse({});

/** The tuning options of `BatchJob`; tests spread them and override what they test. */
export const defaultJobOptions = {
  shardSize: defaults.batch.shardSize,
  batchSize: maxBatchSize(defaults.batching, defaults.model.task),
  maxInFlightBatches: defaults.batching.maxInFlightBatches,
  sortByLength: true,
  mode: "resume",
} satisfies Partial<BatchJobOptions>;

/** The source of `--input PATH`: format from the extension, id/text fields from the config (or `fields`). */
export function defaultFileSource(
  path: string,
  fields: Partial<Pick<FileSourceOptions, "idField" | "textField">> = {},
): FileSource {
  return new FileSource({
    path,
    format: fileFormatOf(path),
    idField: defaults.batch.idField,
    textField: defaults.batch.textField,
    ...fields,
  });
}
