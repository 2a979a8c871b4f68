import { ROOT_CONTEXT, TraceFlags, trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import type { RecordHeaders } from "../../../src/contracts/codec.js";
import {
  extractTraceContext,
  injectTraceContext,
  traceHeadersOf,
} from "../../../src/tracing/kafka-trace-context.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";
const PARENT = `00-${TRACE}-${SPAN}-01`;

const spanOf = (headers: RecordHeaders | undefined) => trace.getSpanContext(extractTraceContext(headers));

describe("W3C trace context in Kafka headers", () => {
  it("extracts traceparent and tracestate from Buffers, strings and arrays", () => {
    for (const headers of [
      { traceparent: Buffer.from(PARENT), tracestate: Buffer.from("k=v") },
      { traceparent: PARENT, tracestate: "k=v" },
      { traceparent: [Buffer.from(PARENT)], tracestate: [Buffer.from("k=v")] },
    ] satisfies RecordHeaders[]) {
      const span = spanOf(headers);
      expect(span).toMatchObject({
        traceId: TRACE,
        spanId: SPAN,
        traceFlags: TraceFlags.SAMPLED,
        isRemote: true,
      });
      expect(span?.traceState?.get("k")).toBe("v");
    }
  });

  it("of a repeated traceparent the first counts; repeated tracestate values join", () => {
    const other = `00-${"1".repeat(32)}-${"2".repeat(16)}-00`;
    const span = spanOf({
      traceparent: [PARENT, Buffer.from(other)],
      tracestate: [Buffer.from("a=1"), "b=2,c=3"],
    });
    expect(span?.spanId).toBe(SPAN);
    expect(span?.traceState?.serialize()).toBe("a=1,b=2,c=3");
  });

  it("no header, an undefined one, or an invalid one: no parent (a new trace)", () => {
    for (const headers of [
      undefined,
      {},
      { traceparent: undefined },
      { traceparent: Buffer.from("garbage") },
      { traceparent: `00-${"0".repeat(32)}-${SPAN}-01` },
      { traceparent: [] },
    ] satisfies (RecordHeaders | undefined)[]) {
      expect(extractTraceContext(headers)).toBe(ROOT_CONTEXT);
    }
  });

  it("injects a span as Buffer headers, replacing old ones and keeping the others", () => {
    const context = extractTraceContext({ traceparent: PARENT, tracestate: "k=v" });
    const headers: RecordHeaders = {
      traceparent: Buffer.from("old"),
      "content-type": Buffer.from("application/json"),
    };
    expect(injectTraceContext(context, headers)).toBe(headers);
    expect(headers.traceparent).toBeInstanceOf(Buffer);
    expect(headers.traceparent!.toString()).toBe(PARENT);
    expect(headers.tracestate!.toString()).toBe("k=v");
    expect(headers["content-type"]!.toString()).toBe("application/json");
    expect(injectTraceContext(ROOT_CONTEXT, {})).toEqual({});
  });

  it("round trip: what one record carries out, the next one reads back", () => {
    const span = trace.getSpanContext(extractTraceContext({ traceparent: Buffer.from(PARENT) }))!;
    const out = traceHeadersOf(span);
    expect(Object.keys(out)).toEqual(["traceparent"]);
    expect(spanOf(out)).toMatchObject({ traceId: TRACE, spanId: SPAN, traceFlags: TraceFlags.SAMPLED });
    const unsampled = traceHeadersOf({ ...span, traceFlags: TraceFlags.NONE });
    expect(unsampled.traceparent!.toString()).toBe(`00-${TRACE}-${SPAN}-00`);
  });
});
