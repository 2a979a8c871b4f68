import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { decodeResult } from "../../src/contracts/result-codec.js";
import type { BatchSeamSpec } from "../support/batch-seams.js";
import { startCli } from "../support/cli-process.js";
import {
  committedRecords,
  createTopics,
  endTransaction,
  testBrokers,
  testKafka,
  transactionalProducer,
  uniqueName,
} from "../support/kafka-harness.js";
import { createTinyModel, TINY_VOCAB, tinyModelConfigYaml } from "../support/tiny-onnx.js";

/** `sluice batch kafka:IN → kafka:OUT` as a child process, killed with SIGKILL inside a transaction. */
let dir: string;
let configPath: string;
const WORDS = TINY_VOCAB.slice(4);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-batch-kafka-e2e-"));
  const model = await createTinyModel(join(dir, "model"), { task: "embedding" });
  configPath = join(dir, "sluice.yaml");
  await writeFile(configPath, tinyModelConfigYaml(model));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const cli = (args: string[], seams?: BatchSeamSpec) =>
  startCli(["-c", configPath, ...args], { KAFKA_BROKERS: testBrokers().join(",") }, seams);

describe("sluice batch kafka → kafka (CLI)", () => {
  it("after SIGKILL inside a shard transaction, a rerun publishes every committed input id exactly once", async () => {
    const kafka = testKafka();
    const input = uniqueName("bk-in");
    const output = uniqueName("bk-out");
    await createTopics([
      { topic: input, numPartitions: 2 },
      { topic: output, numPartitions: 2 },
    ]);
    const ids = Array.from({ length: 40 }, (_, i) => `q${i}`);
    const producer = transactionalProducer(uniqueName("tx"), kafka);
    await producer.connect();
    const send = async (batch: string[], commit: boolean) => {
      const txn = await producer.transaction();
      const sent = await txn.send({
        topic: input,
        messages: batch.map((id, i) => {
          const { value, headers } = encodeRequest(
            {
              id,
              text: Array.from({ length: 1 + (i % 5) }, (_, j) => WORDS[(i + j) % WORDS.length]).join(" "),
            },
            "json",
          );
          return { key: id, value, headers };
        }),
      });
      await endTransaction(txn, commit ? "commit" : "abort", sent);
    };
    await send(ids.slice(0, 20), true);
    await send(["aborted-1", "aborted-2", "aborted-3"], false);
    await send(ids.slice(20), true);
    await producer.disconnect();

    const state = join(dir, "state");
    const args = [
      "batch",
      "-i",
      `kafka:${input}`,
      "-o",
      `kafka:${output}`,
      "--state-dir",
      state,
      "--shard-size",
      "8",
    ];
    const first = cli(args, { commitDelayMs: 600 });
    const deadline = Date.now() + 40_000;
    for (;;) {
      const m = JSON.parse(await readFile(join(state, "manifest.json"), "utf8").catch(() => "null"));
      if (m && m.shards.length >= 1 && m.inFlight) break; // a transaction is open right now
      if (Date.now() > deadline)
        throw new Error(`never saw an in-flight shard: ${await first.done.then((r) => r.out)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    await new Promise((r) => setTimeout(r, 150));
    first.child.kill("SIGKILL");
    await first.done;

    const second = await cli(args).done;
    expect(second.code, second.out).toBe(0);
    const m = JSON.parse(await readFile(join(state, "manifest.json"), "utf8"));
    expect(m.status).toBe("complete");
    expect(m.inFlight).toBeNull();
    expect(m.totals).toMatchObject({ rows: 40, ok: 40, failed: 0 });

    const published: string[] = [];
    for (const message of await committedRecords(output, kafka)) {
      const result = decodeResult(message.value!, message.headers);
      expect(result.status).toBe("ok");
      expect(message.key?.toString()).toBe(result.id);
      published.push(result.id);
    }
    expect(published.sort()).toEqual([...ids].sort());

    const again = await cli(args).done;
    expect(again.out).toMatch(/nothing to do/);
  });
});
