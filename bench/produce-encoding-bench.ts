/**
 * Microbenchmark of one Produce request's encoding: kafkajs 2.2.4's encoder against Sluice's
 * (src/kafka/protocol/produce-encoding.ts), on what one partition transaction at the Kafka-path ceiling
 * sends: N results of ~1.1 KB JSON (36-character keys, one header) and N dedup changelog entries
 * (36-character key, 13-digit value). Checks that the bytes are equal, then times each side in
 * alternating rounds, one process, after a warm-up; prints µs per record and the ratio. Measures, never
 * asserts. `node --import tsx bench/produce-encoding-bench.ts [records per request]`
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { encodeProduceRequest, type ProduceRequestArgs } from "../src/kafka/protocol/produce-encoding.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("kafkajs")), "src");
const kafkajsV3 = require(join(root, "protocol", "requests", "produce", "v3", "request.js")) as (
  args: ProduceRequestArgs,
) => { encode: () => Promise<{ buffer: Buffer }> };
const Long = require(join(root, "utils", "long.js")) as { fromValue: (v: unknown) => unknown };

const perRequest = Number(process.argv[2] ?? 333);
const zeros: number[] = [];
for (let i = 0; i < 384; i++) zeros.push(0);
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const result = (i: number) =>
  Buffer.from(
    JSON.stringify({ id: id(i), status: "ok", model: { name: "noop", version: "1" }, embedding: zeros }),
  );
const args: ProduceRequestArgs = {
  acks: -1,
  timeout: 30_000,
  transactionalId: "sluice-bench-results-0",
  producerId: Long.fromValue(4711),
  producerEpoch: 3,
  topicData: [
    {
      topic: "results",
      partitions: [
        {
          partition: 0,
          firstSequence: 0,
          messages: Array.from({ length: perRequest }, (_, i) => ({
            key: id(i),
            value: result(i),
            headers: { "content-type": "application/json" },
          })),
        },
      ],
    },
    {
      topic: "requests-sluice-changelog",
      partitions: [
        {
          partition: 0,
          firstSequence: 0,
          messages: Array.from({ length: perRequest }, (_, i) => ({ key: id(i), value: "1733300000000" })),
        },
      ],
    },
  ],
};
const records = perRequest * 2;

const now = Date.now();
Date.now = () => now; // kafkajs stamps the records with Date.now(); the same clock for both sides
const same = encodeProduceRequest(args, now).equals((await kafkajsV3(args).encode()).buffer);

async function time(side: "kafkajs" | "sluice", requests: number): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < requests; i++) {
    if (side === "kafkajs") await kafkajsV3(args).encode();
    else encodeProduceRequest(args, now);
  }
  return Number(process.hrtime.bigint() - start) / 1e3 / (requests * records);
}

await time("kafkajs", 20);
await time("sluice", 20);
const rounds: { kafkajs: number; sluice: number }[] = [];
for (let round = 0; round < 5; round++)
  rounds.push({ kafkajs: await time("kafkajs", 40), sluice: await time("sluice", 40) });
console.log(
  `Produce request of ${perRequest} results (${args.topicData[0]?.partitions[0]?.messages[0]?.value?.length} B) + ${perRequest} changelog entries; bytes equal: ${same}; Node ${process.version}`,
);
console.log("| round | kafkajs µs/record | Sluice µs/record | kafkajs ÷ Sluice |");
console.log("| ---: | ---: | ---: | ---: |");
for (const [i, r] of rounds.entries()) {
  console.log(
    `| ${i + 1} | ${r.kafkajs.toFixed(2)} | ${r.sluice.toFixed(2)} | ×${(r.kafkajs / r.sluice).toFixed(1)} |`,
  );
}
