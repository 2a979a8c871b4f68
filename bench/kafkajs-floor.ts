/**
 * The kafkajs floor, a side of bench:ceiling (issue 30): kafkajs alone, in one Node.js process, doing
 * the least an exactly-once processor with a dedup store must do per record, with no Sluice code on
 * the path but the produce encoding correction every Sluice client has
 * (src/kafka/protocol/produce-encoding.ts):
 *  - parse the JSON request for its id (MODE noop) or for its id and its one row of features (MODE
 *    logistic: a V2 request, the regression computed inline in float32 as the Kafka Streams peer does);
 *  - write one result and one dedup changelog entry. The result's JSON around its id (and answer) is
 *    built once, so no result is encoded per record: the no-op model's answer in Sluice's result size
 *    (384 zeros, ~1.1 KB), or a V2 inference response in Sluice's shape and size (~460 B, with its
 *    content-type and x-request-id headers);
 *  - in a transaction with the input offset: one transactional producer per input partition (as
 *    Sluice), one transaction per fetched batch, sends of at most ~450 KB, the partitions' batches
 *    handled concurrently.
 * No deadlines, micro-batches, model calls, metrics, logs or spans: what is left is kafkajs's own cost
 * (fetch decoding, producing, the transaction round trips). It runs until SIGTERM, like `sluice serve`.
 *
 *   node dist/bench/kafkajs-floor.js BROKERS REQUESTS RESULTS GROUP [noop|logistic]
 */
import { Kafka, logLevel, type Producer } from "kafkajs";
import { fixProduceEncoding } from "../src/kafka/protocol/produce-encoding.js";
import { LR_B, LR_W } from "../test/support/tiny-tensor-onnx.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const [brokers, requests, results, group, mode = "noop"] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string?,
];
if (!group || (mode !== "noop" && mode !== "logistic"))
  throw new Error("usage: kafkajs-floor.js BROKERS REQUESTS RESULTS GROUP [noop|logistic]");
const dedup = `${group}.dedup`;
/** Records per send: ~450 KB of results and changelog entries (a batch above 1 MiB is refused). */
const SEND_RECORDS = 400;

/** The result's JSON around its id: the no-op model's answer in Sluice's result size, built once. */
const zeros: number[] = [];
for (let i = 0; i < 384; i++) zeros.push(0);
const [HEAD, TAIL] = JSON.stringify({
  id: "@ID@",
  status: "ok",
  model: { name: "noop", version: "0" },
  output: { embedding: zeros },
  timing: { note: "kafkajs floor".padEnd(200) },
}).split("@ID@") as [string, string];

/** The V2 response around its id and its probability, in Sluice's field order and size, built once. */
const [V2_HEAD, V2_MID, V2_TAIL] = JSON.stringify({
  model_name: "logistic-regression",
  model_version: "1a1e324d8292",
  id: "@ID@",
  parameters: {
    status: "ok",
    source_topic: requests,
    source_partition: 0,
    source_offset: "0",
    request_timestamp: Date.now(),
    queue_ms: 0,
    inference_ms: 0.05,
    batch_size: 256,
    completed_at: Date.now(),
    truncated: false,
  },
  outputs: [{ name: "probability", datatype: "FP32", shape: [1, 1], data: ["@P@"] }],
})
  .replace('"@P@"', "@P@")
  .split(/@ID@|@P@/) as [string, string, string];

/** The regression in float32, as the ONNX graph and the Kafka Streams peer compute it. */
const W = Float32Array.from(LR_W);
function probability(x: readonly number[]): number {
  let z = 0;
  for (let i = 0; i < W.length; i++)
    z = Math.fround(z + Math.fround(Math.fround(x[i] as number) * (W[i] as number)));
  z = Math.fround(z + Math.fround(LR_B));
  return Math.fround(1 / (1 + Math.exp(-z)));
}

/** What the floor reads of a request: its id (a JSON request's or a V2 one's) and a V2 request's row. */
interface FloorRequest {
  id: string;
  inputs?: { data: number[] }[];
}

/** One result's value and headers for one request's bytes. */
function answer(value: Buffer): { id: string; value: Buffer; headers?: Record<string, string> } {
  const parsed = JSON.parse(value.toString("utf8")) as FloorRequest;
  const id = parsed.id;
  const quoted = JSON.stringify(id).slice(1, -1);
  if (mode === "noop") return { id, value: Buffer.from(HEAD + quoted + TAIL) };
  const p = probability(parsed.inputs?.[0]?.data ?? []);
  return {
    id,
    value: Buffer.from(V2_HEAD + quoted + V2_MID + String(p) + V2_TAIL),
    headers: { "content-type": "application/json", "x-request-id": id },
  };
}

async function main(): Promise<void> {
  fixProduceEncoding();
  const kafka = new Kafka({ clientId: group, brokers: brokers.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const { partitions } = (await admin.fetchTopicMetadata({ topics: [requests] })).topics[0] as {
    partitions: unknown[];
  };
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: dedup, numPartitions: partitions.length }],
  });
  await admin.disconnect();
  const producers = new Map<number, Producer>();
  const producer = async (partition: number) => {
    let p = producers.get(partition);
    if (!p) {
      p = kafka.producer({
        transactionalId: `${group}-${partition}`,
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
      });
      producers.set(partition, p);
      await p.connect();
    }
    return p;
  };
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic: requests, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: partitions.length,
    eachBatch: async ({ batch }) => {
      const out: { key: string; value: Buffer; headers?: Record<string, string>; partition: number }[] = [];
      const changelog: { key: string; value: string; partition: number }[] = [];
      const now = String(Date.now());
      for (const m of batch.messages) {
        const { id, value, headers } = answer(m.value as Buffer);
        out.push({ key: id, value, ...(headers ? { headers } : {}), partition: batch.partition });
        changelog.push({ key: id, value: now, partition: batch.partition });
      }
      const txn = await (await producer(batch.partition)).transaction();
      for (let i = 0; i < out.length; i += SEND_RECORDS)
        await txn.sendBatch({
          topicMessages: [
            { topic: results, messages: out.slice(i, i + SEND_RECORDS) },
            { topic: dedup, messages: changelog.slice(i, i + SEND_RECORDS) },
          ],
        });
      await txn.sendOffsets({
        consumerGroupId: group,
        topics: [
          {
            topic: batch.topic,
            partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }],
          },
        ],
      });
      await txn.commit();
    },
  });
  process.once("SIGTERM", () => {
    void (async () => {
      await consumer.disconnect().catch(() => undefined);
      for (const p of producers.values()) await p.disconnect().catch(() => undefined);
      process.exit(0);
    })();
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
