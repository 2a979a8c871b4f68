import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kafka } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchJob } from "../../src/batch/batch-job.js";
import type { BatchManifest } from "../../src/batch/batch-manifest.js";
import { PartFileSink } from "../../src/batch/part-file-sink.js";
import { modelSettings } from "../../src/config/model-settings.js";
import { encodeRequest, RequestDecoder } from "../../src/contracts/request-codec.js";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { KafkaRangeSource } from "../../src/kafka/read/kafka-range-source.js";
import { KafkaTopicSink, SHARD_HEADER } from "../../src/kafka/write/kafka-topic-sink.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import { defaultFileSource, defaultJobOptions } from "../support/batch-defaults.js";
import {
  committedRecords,
  createTopics,
  endTransaction,
  produceMessages,
  testKafka,
  transactionalProducer,
  uniqueName,
} from "../support/kafka-harness.js";
import { createTinyModel, TINY_VOCAB } from "../support/tiny-onnx.js";

let dir: string;
let model: TextModelRunner;
let kafka: Kafka;
const decoder = new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1 << 20 });
const WORDS = TINY_VOCAB.slice(4);
const text = (i: number) =>
  Array.from({ length: 1 + (i % 6) }, (_, j) => WORDS[(i + j) % WORDS.length]).join(" ");

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-batch-kafka-"));
  const tiny = await createTinyModel(join(dir, "model"), { task: "embedding" });
  model = await TextModelRunner.create(
    modelSettings({
      modelPath: tiny.modelPath,
      tokenizerPath: tiny.tokenizerPath,
      name: "tiny",
    }),
  );
  kafka = testKafka();
});
afterAll(async () => {
  await model?.close();
  await rm(dir, { recursive: true, force: true });
});

async function produce(topic: string, ids: string[], how: "plain" | "commit" | "abort", partition: number) {
  const messages = ids.map((id) => {
    const { value, headers } = encodeRequest({ id, text: text(Number(id.replace(/\D/g, ""))) }, "json");
    return { key: id, value, headers, partition };
  });
  if (how === "plain") return produceMessages(topic, messages, { kafka });
  const p = transactionalProducer(uniqueName("tx"), kafka);
  await p.connect();
  const txn = await p.transaction();
  await endTransaction(txn, how, await txn.send({ topic, messages }), kafka);
  await p.disconnect();
}

async function partIds(out: string): Promise<string[]> {
  const ids: string[] = [];
  for (const name of (await readdir(out)).filter((n) => n.endsWith(".jsonl") && n.includes("part-")).sort()) {
    for (const line of (await readFile(join(out, name), "utf8")).split("\n")) {
      if (line) ids.push((JSON.parse(line) as { id: string }).id);
    }
  }
  return ids;
}

async function readTopicIds(topic: string): Promise<{ id: string; shard: string }[]> {
  return (await committedRecords(topic, kafka)).map((message) => ({
    id: decodeResult(message.value!, message.headers).id,
    shard: String(message.headers?.[SHARD_HEADER]),
  }));
}

/** The topic sink as `sluice batch` builds it with the default delivery settings. */
const topicSink = (topic: string) =>
  new KafkaTopicSink({ kafka, topic, transactionTimeoutMs: 60_000, maxTransactionBytes: 524_288 });

describe("batch mode over Kafka", () => {
  it("a topic range that includes aborted transactions outputs only committed records, in partition order", async () => {
    const topic = uniqueName("batch-in");
    await createTopics([{ topic, numPartitions: 2 }]);
    await produce(topic, ["c0", "c1", "c2"], "commit", 0);
    await produce(topic, ["x0", "x1", "x2", "x3"], "abort", 0);
    await produce(topic, ["p0", "p1"], "plain", 0);
    await produce(topic, ["c3", "c4"], "commit", 0);
    await produce(topic, ["x4"], "abort", 1);
    await produce(topic, ["c5", "c6", "c7"], "commit", 1);
    await produce(topic, ["x5", "x6"], "abort", 1); // the range ends on an abort marker

    const out = join(dir, "from-topic");
    const job = () =>
      new BatchJob({
        source: new KafkaRangeSource({ kafka, decoder, topic }),
        sink: new PartFileSink({ dir: out, format: "jsonl" }),
        model,
        stateDir: out,
        ...defaultJobOptions,
        shardSize: 4,
        outputConfig: { task: "embedding" },
      });
    const summary = await job().run();
    expect(summary.rowsOk).toBe(10);
    const ids = await partIds(out);
    expect(ids).toEqual(["c0", "c1", "c2", "p0", "p1", "c3", "c4", "c5", "c6", "c7"]);
    const rows = (await readFile(join(out, "part-00000.jsonl"), "utf8")).split("\n").filter(Boolean);
    expect(JSON.parse(rows[0]!).source).toEqual({ topic, partition: 0, offset: "0" });
    const manifest = JSON.parse(await readFile(join(out, "manifest.json"), "utf8")) as BatchManifest;
    expect(manifest.input).toMatchObject({ kind: "kafka", rows: 10, spec: { from: null, to: null } });
    expect(manifest.input.kind === "kafka" && manifest.input.ranges).toEqual([
      { partition: 0, startOffset: "0", endOffset: "14" }, // 3+1 marker, 4+1, 2, 2+1
      { partition: 1, startOffset: "0", endOffset: "9" }, // 1+1, 3+1, 2+1
    ]);

    // Records appended later are outside the fixed range: a rerun still has nothing to do.
    await produce(topic, ["late"], "plain", 0);
    const again = await job().run();
    expect(again.action).toBe("nothing-to-do");
    expect(await partIds(out)).toEqual(ids);
  });

  it("a range holding only aborted records ends with zero rows instead of waiting", async () => {
    const topic = uniqueName("batch-aborted");
    await createTopics([{ topic, numPartitions: 1 }]);
    await produce(topic, ["x0", "x1", "x2"], "abort", 0);
    const out = join(dir, "aborted-only");
    const summary = await new BatchJob({
      source: new KafkaRangeSource({ kafka, decoder, topic }),
      sink: new PartFileSink({ dir: out, format: "jsonl" }),
      model,
      stateDir: out,
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    expect(summary.rowsOk).toBe(0);
    const manifest = JSON.parse(await readFile(join(out, "manifest.json"), "utf8")) as BatchManifest;
    expect(manifest).toMatchObject({ status: "complete", input: { rows: 0 } });
  });

  it("--from/--to select per-partition offsets and timestamps", async () => {
    const topic = uniqueName("batch-range");
    await createTopics([{ topic, numPartitions: 1 }]);
    await produce(topic, ["r0", "r1", "r2", "r3", "r4", "r5"], "plain", 0);
    const out = join(dir, "range");
    await new BatchJob({
      source: new KafkaRangeSource({ kafka, decoder, topic, from: "0:2", to: "0:5" }),
      sink: new PartFileSink({ dir: out, format: "jsonl" }),
      model,
      stateDir: out,
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    expect(await partIds(out)).toEqual(["r2", "r3", "r4"]);

    // Naming a partition selects it: the other partition's records are not read.
    const two = uniqueName("batch-two");
    await createTopics([{ topic: two, numPartitions: 2 }]);
    await produce(two, ["a0", "a1", "a2"], "plain", 0);
    await produce(two, ["b0", "b1", "b2"], "plain", 1);
    const outTwo = join(dir, "range-two");
    await new BatchJob({
      source: new KafkaRangeSource({ kafka, decoder, topic: two, from: "1:1" }),
      sink: new PartFileSink({ dir: outTwo, format: "jsonl" }),
      model,
      stateDir: outTwo,
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    expect(await partIds(outTwo)).toEqual(["b1", "b2"]);

    const cut = new Date(Date.now() + 1000);
    await new Promise((r) => setTimeout(r, 1200));
    await produce(topic, ["r6", "r7"], "plain", 0);
    const outTs = join(dir, "range-ts");
    await new BatchJob({
      source: new KafkaRangeSource({ kafka, decoder, topic, from: cut.toISOString() }),
      sink: new PartFileSink({ dir: outTs, format: "jsonl" }),
      model,
      stateDir: outTs,
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    expect(await partIds(outTs)).toEqual(["r6", "r7"]);
  });

  it("publishes each shard as one transaction and never duplicates after a crash between commit and checkpoint", async () => {
    const output = uniqueName("batch-out");
    await createTopics([{ topic: output, numPartitions: 2 }]);
    const input = join(dir, "to-topic.jsonl");
    await writeFile(
      input,
      Array.from({ length: 9 }, (_, i) => JSON.stringify({ id: `k${i}`, text: text(i) })).join("\n"),
    );
    const state = join(dir, "to-topic-state");
    const job = () =>
      new BatchJob({
        source: defaultFileSource(input),
        sink: topicSink(output),
        model,
        stateDir: state,
        ...defaultJobOptions,
        shardSize: 4,
        outputConfig: {},
      });
    expect((await job().run()).rowsOk).toBe(9);
    const first = await readTopicIds(output);
    expect(first.map((r) => r.id).sort()).toEqual(Array.from({ length: 9 }, (_, i) => `k${i}`).sort());
    expect(first.filter((r) => r.shard === "part-00002").map((r) => r.id)).toEqual(["k8"]);

    // Simulate a crash after the last shard's commit but before its manifest update.
    const path = join(state, "manifest.json");
    const m = JSON.parse(await readFile(path, "utf8")) as BatchManifest;
    const last = m.shards.pop()!;
    m.status = "running";
    m.inFlight = {
      key: last.key,
      transactionalId: `sluice-batch-${m.runId}-${last.key}`,
      outputOffsets: [
        { partition: 0, offset: "0" },
        { partition: 1, offset: "0" },
      ],
      round: null,
      pending: last,
    };
    await writeFile(path, JSON.stringify(m));
    const resumed = await job().run();
    expect(resumed.rowsOk).toBe(0); // recovered as committed: nothing re-published
    const after = await readTopicIds(output);
    expect(after.map((r) => r.id).sort()).toEqual(first.map((r) => r.id).sort());
    const final = JSON.parse(await readFile(path, "utf8")) as BatchManifest;
    expect(final.status).toBe("complete");
    expect(final.shards.map((s) => s.key)).toEqual(["part-00000", "part-00001", "part-00002"]);
    expect(final.inFlight).toBeNull();
  });

  it("records a result the topic refuses even alone as a failed row, and publishes the rest of its shard", async () => {
    const output = uniqueName("batch-small");
    // A topic that takes records up to ~20 KB: one row's result carries 30 KB of attributes.
    await createTopics([{ topic: output, configEntries: [{ name: "max.message.bytes", value: "20000" }] }]);
    const input = join(dir, "too-large.jsonl");
    const rows = Array.from({ length: 12 }, (_, i) =>
      JSON.stringify({
        id: `t${i}`,
        text: text(i),
        ...(i === 5 ? { attributes: { note: "n".repeat(30_000) } } : {}),
      }),
    );
    await writeFile(input, rows.join("\n"));
    const state = join(dir, "too-large-state");
    const summary = await new BatchJob({
      source: defaultFileSource(input),
      sink: topicSink(output),
      model,
      stateDir: state,
      ...defaultJobOptions,
      shardSize: 50,
      outputConfig: {},
    }).run();
    expect(summary).toMatchObject({ rowsOk: 11, rowsFailed: 1 });
    const ids = (await readTopicIds(output)).map((r) => r.id);
    expect(ids.sort()).toEqual(
      Array.from({ length: 12 }, (_, i) => `t${i}`)
        .filter((id) => id !== "t5")
        .sort(),
    );
    const m = JSON.parse(await readFile(join(state, "manifest.json"), "utf8")) as BatchManifest;
    expect(m.status).toBe("complete");
    expect(m.shards[0]).toMatchObject({ rows: 12, ok: 11, failures: 1 });
    const failures = (await readFile(join(state, m.shards[0]!.failuresFile!), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(failures).toMatchObject([{ id: "t5", row: 5, code: "PUBLISH_TOO_LARGE" }]);
  });
});
