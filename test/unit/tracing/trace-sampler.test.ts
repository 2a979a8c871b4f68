import type { IHeaders } from "kafkajs";
import { describe, expect, it } from "vitest";
import { traceSampler } from "../../../src/tracing/trace-sampler.js";
import { inMemoryTracing } from "./in-memory-tracing.js";

const sampled: IHeaders = { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` };
const unsampled: IHeaders = { traceparent: `00-${"c".repeat(32)}-${"d".repeat(16)}-00` };

/** How many of a sampled-parent, an unsampled-parent and a parentless request span are recorded. */
async function recorded(config: Parameters<typeof inMemoryTracing>[0]) {
  const t = await inMemoryTracing(config);
  const tracer = t.tracing.tracer;
  const spans = [sampled, unsampled, undefined].map((headers, i) =>
    tracer.startRequest(`t${i}`, 0, { offset: String(i), headers }, "online"),
  );
  for (const span of spans) span.commit();
  const names = (await t.finished()).map((s) => s.name);
  return {
    sampledParent: names.includes("request t0"),
    unsampledParent: names.includes("request t1"),
    root: names.includes("request t2"),
  };
}

describe("the sampler tracing.sampler names", () => {
  it("builds the SDK's samplers", () => {
    const describe = (sampler: Parameters<typeof traceSampler>[0]["sampler"], samplerRatio = 1) =>
      traceSampler({ sampler, samplerRatio }).toString();
    expect(describe("always_on")).toBe("AlwaysOnSampler");
    expect(describe("always_off")).toBe("AlwaysOffSampler");
    expect(describe("traceidratio", 0.5)).toBe("TraceIdRatioBased{0.5}");
    expect(describe("parentbased_always_on")).toMatch(/^ParentBased\{root=AlwaysOnSampler/);
    expect(describe("parentbased_always_off")).toMatch(/^ParentBased\{root=AlwaysOffSampler/);
    expect(describe("parentbased_traceidratio", 0.1)).toMatch(/^ParentBased\{root=TraceIdRatioBased\{0.1\}/);
  });

  it("parentbased_always_on (the default) follows the request's sampled flag, records new traces", async () => {
    expect(await recorded({})).toEqual({ sampledParent: true, unsampledParent: false, root: true });
  });

  it("parentbased_always_off and parentbased_traceidratio 0 follow the flag, drop new traces", async () => {
    const followOnly = { sampledParent: true, unsampledParent: false, root: false };
    expect(await recorded({ sampler: "parentbased_always_off" })).toEqual(followOnly);
    expect(await recorded({ sampler: "parentbased_traceidratio", samplerRatio: 0 })).toEqual(followOnly);
  });

  it("always_on, always_off and traceidratio ignore the flag", async () => {
    expect(await recorded({ sampler: "always_on" })).toEqual({
      sampledParent: true,
      unsampledParent: true,
      root: true,
    });
    const none = { sampledParent: false, unsampledParent: false, root: false };
    expect(await recorded({ sampler: "always_off" })).toEqual(none);
    expect(await recorded({ sampler: "traceidratio", samplerRatio: 0 })).toEqual(none);
    expect(await recorded({ sampler: "traceidratio", samplerRatio: 1 })).toEqual({
      sampledParent: true,
      unsampledParent: true,
      root: true,
    });
  });

  it("an unrecorded request still passes its trace on, marked not sampled", async () => {
    const t = await inMemoryTracing();
    const headers = t.tracing.tracer
      .startRequest("t", 0, { offset: "0", headers: unsampled }, "online")
      .traceHeaders();
    expect(headers?.traceparent?.toString()).toMatch(new RegExp(`^00-${"c".repeat(32)}-[0-9a-f]{16}-00$`));
  });
});
