import * as hdr from "hdr-histogram-js";
import type { Producer } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import type { ArrivalReader } from "./arrival-reader.js";

const now = () => performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface OpenLoopOptions {
  producer: Producer;
  topic: string;
  reader: ArrivalReader;
  /** Request ids are `<prefix><n>`. */
  prefix: string;
  /** Requests per second. */
  rate: number;
  seconds: number;
  text: (i: number) => string;
  /** How long to wait for the last result, ms. Default 60 000. */
  waitMs?: number;
}

export interface OpenLoopLatency {
  sent: number;
  received: number;
  p50: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
}

/**
 * Open-loop constant-rate load: requests are due on a fixed schedule whether or not earlier ones
 * finished. Latency = read_committed arrival − *scheduled* send time, in an HDR histogram, so a stall
 * is charged to every request it delays (coordinated omission avoided by construction; docs/design.md §3).
 */
export async function runOpenLoop(o: OpenLoopOptions): Promise<OpenLoopLatency> {
  const total = Math.max(1, Math.round(o.rate * o.seconds));
  const scheduled: number[] = new Array(total);
  const t0 = now() + 50;
  let next = 0;
  const sends: Promise<unknown>[] = [];
  while (next < total) {
    const due: { key: string; value: Buffer; headers: Record<string, string> }[] = [];
    const t = now();
    while (next < total && t0 + (next * 1000) / o.rate <= t) {
      scheduled[next] = t0 + (next * 1000) / o.rate;
      const id = `${o.prefix}${next}`;
      due.push({ key: id, ...encodeRequest({ id, text: o.text(next) }, "json") });
      next++;
    }
    if (due.length > 0) sends.push(o.producer.send({ topic: o.topic, messages: due }));
    await sleep(1);
  }
  await Promise.all(sends);
  await o.reader.waitFor(o.prefix, total, o.waitMs ?? 60_000);
  const h = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000,
    numberOfSignificantValueDigits: 3,
  });
  let received = 0;
  for (let i = 0; i < total; i++) {
    const at = o.reader.arrivals.get(`${o.prefix}${i}`);
    if (at === undefined) continue;
    received++;
    h.recordValue(Math.max(1, Math.round(at - (scheduled[i] as number))));
  }
  const out = {
    sent: total,
    received,
    p50: h.getValueAtPercentile(50),
    p95: h.getValueAtPercentile(95),
    p99: h.getValueAtPercentile(99),
    p999: h.getValueAtPercentile(99.9),
    max: h.maxValue,
  };
  h.destroy();
  return out;
}
