import type { Kafka, KafkaMessage } from "kafkajs";
import type { PartitionRange } from "../../runs/offset-spec.js";
import { readBounded } from "./bounded-reader.js";

export interface RangeMessage {
  partition: number;
  message: KafkaMessage;
}

export interface KafkaRangeReaderOptions {
  kafka: Kafka;
  topic: string;
  ranges: readonly PartitionRange[];
  /** Records fetched ahead of the reader before fetching waits. Default 5000. */
  maxBufferedRecords?: number;
}

/**
 * Reads fixed offset ranges of a topic with `read_committed`, partition by partition in offset order
 * (so row numbers are the same on every run), and stops at the end offsets given at construction even
 * if the topic keeps growing: the bounded reader (`readBounded`, sequential) as an async iterator.
 * While the caller is slow, the fetch waits instead of buffering without bound.
 * Breaking out of the loop stops the read.
 */
export async function* readKafkaRanges(opts: KafkaRangeReaderOptions): AsyncGenerator<RangeMessage> {
  const maxBuffered = opts.maxBufferedRecords ?? 5000;
  const ranges = opts.ranges
    .filter((r) => BigInt(r.endOffset) > BigInt(r.startOffset))
    .sort((a, b) => a.partition - b.partition)
    .map((r) => ({
      topic: opts.topic,
      partition: r.partition,
      fromOffset: r.startOffset,
      endOffset: r.endOffset,
    }));
  if (ranges.length === 0) return;

  const buffer: RangeMessage[] = [];
  const abort = new AbortController();
  let wakeReader: () => void = () => {};
  let wakeFetch: () => void = () => {};
  let ended = false;
  let failure: unknown;
  const read = readBounded({
    kafka: opts.kafka,
    ranges,
    order: "sequential",
    doing: `reading ${opts.topic}`,
    signal: abort.signal,
    onBatch: async (range, messages) => {
      for (const message of messages) buffer.push({ partition: range.partition, message });
      wakeReader();
      while (buffer.length > maxBuffered && !abort.signal.aborted)
        await new Promise<void>((resolve) => {
          wakeFetch = resolve;
        });
      return undefined;
    },
  }).then(
    () => {
      ended = true;
      wakeReader();
    },
    (error: unknown) => {
      failure = error;
      wakeReader();
    },
  );

  try {
    for (;;) {
      if (failure !== undefined) throw failure;
      if (buffer.length > 0) {
        // Hand out everything buffered; splice keeps this O(n) instead of shift() per item.
        const chunk = buffer.splice(0, buffer.length);
        wakeFetch();
        for (const m of chunk) yield m;
        continue;
      }
      if (ended) return;
      await new Promise<void>((resolve) => {
        wakeReader = resolve;
      });
    }
  } finally {
    abort.abort();
    wakeFetch();
    await read;
  }
}
