import { describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../../../src/delivery/outbound-message.js";
import { MAX_SEND_BYTES } from "../../../../src/delivery/size-refusal.js";
import { classify, isTooLarge } from "../../../../src/kafka/write/produce-failure.js";
import { chunks, toTopicMessages } from "../../../../src/kafka/write/record-collector.js";

const msg = (topic: string, i: number, bytes: number): OutboundMessage => ({
  topic,
  key: `k-${i}`,
  value: Buffer.alloc(bytes),
  headers: { "content-type": "application/json" },
});

/** The sendBatch payloads a writer sends for `messages`. */
const chunked = (messages: OutboundMessage[], maxBytes = MAX_SEND_BYTES) =>
  chunks(messages, maxBytes).map(toTopicMessages);

describe("chunked (sendBatch payloads under the broker's record-batch limit)", () => {
  it("keeps every message, in order, and bounds each chunk", () => {
    const messages = Array.from({ length: 1000 }, (_, i) =>
      msg(i % 3 === 0 ? "changelog" : "results", i, 1500),
    );
    const chunks = chunked(messages, 100_000);
    expect(chunks.length).toBeGreaterThan(10);
    const flattened: string[] = [];
    for (const chunk of chunks) {
      let bytes = 0;
      for (const t of chunk) for (const m of t.messages) bytes += (m.value as Buffer).length;
      expect(bytes).toBeLessThanOrEqual(100_000);
    }
    // Order within each topic is preserved (idempotent producer order = publish order).
    for (const topic of ["results", "changelog"]) {
      for (const chunk of chunks)
        for (const t of chunk) if (t.topic === topic) flattened.push(...t.messages.map((m) => String(m.key)));
      const expected = messages.filter((m) => m.topic === topic).map((m) => String(m.key));
      expect(flattened).toEqual(expected);
      flattened.length = 0;
    }
  });

  it("puts an oversized message alone and returns nothing for nothing", () => {
    const chunks = chunked([msg("r", 1, 10), msg("r", 2, 5000), msg("r", 3, 10)], 1000);
    expect(chunks.map((c) => c.flatMap((t) => t.messages.map((m) => m.key)))).toEqual([
      ["k-1"],
      ["k-2"],
      ["k-3"],
    ]);
    expect(chunked([])).toEqual([]);
  });
});

describe("classify (broker size refusals are split, not reset)", () => {
  it("maps MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE, also wrapped, to PUBLISH_TOO_LARGE", () => {
    const protocol = (type: string) => Object.assign(new Error(`broker says ${type}`), { type });
    for (const type of ["MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"]) {
      expect(classify(protocol(type), "t", 0, "committing").code).toBe("PUBLISH_TOO_LARGE");
      const wrapped = Object.assign(new Error("retries exceeded"), { originalError: protocol(type) });
      expect(isTooLarge(wrapped)).toBe(true);
      const aggregate = Object.assign(new Error("aggregate"), { errors: [protocol(type)] });
      expect(isTooLarge(aggregate)).toBe(true);
    }
    expect(classify(protocol("INVALID_PRODUCER_EPOCH"), "t", 0, "committing").code).toBe("PRODUCER_FENCED");
    expect(classify(protocol("NOT_LEADER_FOR_PARTITION"), "t", 0, "committing").code).toBe(
      "TRANSACTION_FAILED",
    );
  });
});
