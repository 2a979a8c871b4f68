import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { startCli } from "../support/cli-process.js";
import { committedRecords, createTopics, testBrokers, uniqueName } from "../support/kafka-harness.js";

/**
 * `sluice batch --input rows.jsonl --output kafka:TOPIC` as a new user runs it: the real default model
 * (384-dimension embeddings, ~8 KB of JSON per result) and the default shard size (10,000 rows, so all
 * 600 rows are one shard and one transaction). Before the one write path, the topic sink sent chunks
 * of 500 records with no byte bound: 500 results to one partition are ~4 MB, above the broker's 1 MiB
 * record-batch limit, and every rerun failed with TRANSACTION_FAILED the same way.
 */
const ROWS = 600;
let dir: string;

const SENTENCES = [
  "Kafka keeps an ordered, replicated log of records per partition, and consumers track their own position.",
  "Micro-batching groups requests that arrive close together, so one model call serves several of them.",
  "A backfill re-scores a historical dataset after a model upgrade, while online traffic keeps flowing.",
  "Exactly-once delivery here means read_committed readers see each result once, even after a crash.",
];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-batch-default-model-"));
  const rows = Array.from({ length: ROWS }, (_, i) => {
    // Paragraph-length texts of varying length (1-4 sentences), unique per row.
    const text = Array.from({ length: 1 + (i % 4) }, (_, j) => SENTENCES[(i + j) % SENTENCES.length]).join(
      " ",
    );
    return JSON.stringify({ id: `row-${i}`, text: `${text} (row ${i})` });
  });
  await writeFile(join(dir, "rows.jsonl"), `${rows.join("\n")}\n`);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The ids of every committed result of the topic, read at read_committed. */
async function publishedIds(topic: string): Promise<string[]> {
  return (await committedRecords(topic)).map((message) => {
    const result = decodeResult(message.value as Buffer, message.headers);
    expect(result.status).toBe("ok");
    expect(message.key?.toString()).toBe(result.id);
    return result.id;
  });
}

describe("sluice batch to a topic with the default model and the default shard size", () => {
  for (const partitions of [1, 3]) {
    it(`publishes every row exactly once to a topic of ${partitions} partition(s)`, async () => {
      const topic = uniqueName(`batch-default-${partitions}p`);
      await createTopics([{ topic, numPartitions: partitions }]);
      const state = join(dir, `state-${partitions}`);
      const run = await startCli(
        ["batch", "--input", join(dir, "rows.jsonl"), "--output", `kafka:${topic}`, "--state-dir", state],
        { KAFKA_BROKERS: testBrokers().join(",") },
      ).done;
      expect(run.code, run.out).toBe(0);
      const manifest = JSON.parse(await readFile(join(state, "manifest.json"), "utf8"));
      expect(manifest.status).toBe("complete");
      expect(manifest.totals).toMatchObject({ rows: ROWS, ok: ROWS, failed: 0 });
      expect(manifest.shards).toHaveLength(1);

      const ids = await publishedIds(topic);
      expect(ids).toHaveLength(ROWS);
      expect(new Set(ids).size).toBe(ROWS);

      // A rerun of the same command writes nothing more.
      const again = await startCli(
        ["batch", "--input", join(dir, "rows.jsonl"), "--output", `kafka:${topic}`, "--state-dir", state],
        { KAFKA_BROKERS: testBrokers().join(",") },
      ).done;
      expect(again.code, again.out).toBe(0);
      expect(again.out).toMatch(/nothing to do/);
      expect(await publishedIds(topic)).toHaveLength(ROWS);
    }, 240_000);
  }
});
