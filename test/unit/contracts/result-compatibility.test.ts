import { readFileSync } from "node:fs";
import { join } from "node:path";
import avro from "avsc";
import { describe, expect, it } from "vitest";
import { avroType, packageRoot } from "../../../src/contracts/avro-schemas.js";
import type { InferenceResult } from "../../../src/contracts/inference.js";
import { decodeResult, ResultEncoder } from "../../../src/contracts/result-codec.js";

/**
 * Schema evolution of results (docs/contracts.md, "Compatibility"): readers built on the result schema
 * as it is on main before lanes (copied verbatim from main, commit 0ecb660) must still decode results
 * written with the current schema, including `fallback` results and `runId`.
 */
const mainSchema = JSON.parse(
  readFileSync(join(packageRoot(), "test", "fixtures", "inference-result.main-0ecb660.avsc"), "utf8"),
) as avro.Schema;
const oldType = avro.Type.forSchema(mainSchema, { wrapUnions: "auto" });

const fallback: InferenceResult = {
  id: "r-1",
  status: "fallback",
  output: { label: "block", scores: { block: 0.9, allow: 0.1 } },
  model: { name: "moderation", version: "0123456789ab" },
  source: { topic: "requests", partition: 0, offset: "42" },
  timing: { requestTimestamp: 1, queueMs: 2, inferenceMs: 0, batchSize: 0, completedAt: 3 },
  attributes: null,
  truncated: false,
  error: null,
  fallbackReason: "deadline",
};

const avroEncoder = new ResultEncoder({ codec: "avro" });
const jsonEncoder = new ResultEncoder({ codec: "json" });

describe("result schema evolution", () => {
  it("a reader of main's schema decodes a new fallback result (status ok, the rule's output)", () => {
    const { value } = avroEncoder.encode({ ...fallback, runId: "run-1" });
    const resolver = oldType.createResolver(avroType("inference-result"));
    const old = oldType.fromBuffer(value, resolver) as Record<string, unknown>;
    expect(old["id"]).toBe("r-1");
    expect(old["status"]).toBe("ok");
    expect(old["output"]).toEqual({ embedding: null, label: "block", scores: { block: 0.9, allow: 0.1 } });
    expect(old).not.toHaveProperty("fallbackReason");
  });

  it("the current reader sees status fallback and its reason in both codecs", () => {
    for (const encoder of [avroEncoder, jsonEncoder]) {
      const { value, headers } = encoder.encode(fallback);
      expect(decodeResult(value, headers)).toEqual(fallback);
    }
    const withRun = { ...fallback, status: "ok" as const, fallbackReason: null, runId: "run-9" };
    const { value, headers } = avroEncoder.encode(withRun);
    expect(decodeResult(value, headers)).toEqual({ ...withRun, fallbackReason: undefined });
  });

  it("the current reader decodes records written with main's schema (no fallbackReason, no runId)", () => {
    const oldRecord = {
      ...fallback,
      status: "ok",
      output: { embedding: null, label: "allow", scores: { allow: 1 } },
      fallbackReason: undefined,
    };
    const bytes = oldType.toBuffer(oldRecord);
    const resolver = avroType("inference-result").createResolver(oldType);
    const current = avroType("inference-result").fromBuffer(bytes, resolver) as Record<string, unknown>;
    expect(current["fallbackReason"]).toBeNull();
    expect(current["runId"]).toBeNull();
    expect(current["status"]).toBe("ok");
  });

  it("JSON: a result without the new fields is unchanged; a fallback adds a status value and one field", () => {
    const plain = { ...fallback, status: "ok" as const, fallbackReason: undefined };
    const json = JSON.parse(jsonEncoder.encode(plain).value.toString("utf8")) as Record<string, unknown>;
    // Exactly main's fields, in main's order.
    const mainFields = (mainSchema as unknown as { fields: { name: string }[] }).fields.map((f) => f.name);
    expect(Object.keys(json)).toEqual(mainFields);
    const fb = JSON.parse(jsonEncoder.encode(fallback).value.toString("utf8")) as Record<string, unknown>;
    expect(fb["status"]).toBe("fallback");
    expect(fb["fallbackReason"]).toBe("deadline");
    expect(fb["output"]).toEqual(fallback.output);
  });

  it("what does not hold: raw Avro without the writer's schema, and a new enum symbol for main's readers", () => {
    // Without resolution an old reader stops at the new fields' bytes ("trailing data"): readers
    // need the writer's schema (a registry, or the schema file shipped with the producer).
    const { value } = avroEncoder.encode(fallback);
    expect(() => oldType.fromBuffer(value)).toThrow(/trailing data/);
    // Why the status enum keeps its symbols: main's enum has no default, so a writer enum with one
    // more symbol cannot be resolved by main's readers at all, not even for `ok` records.
    const grown = JSON.parse(JSON.stringify(mainSchema)) as { fields: { name: string; type: unknown }[] };
    const status = grown.fields.find((f) => f.name === "status") as { type: { symbols: string[] } };
    status.type.symbols = [...status.type.symbols, "fallback"];
    expect(() => oldType.createResolver(avro.Type.forSchema(grown as avro.Schema))).toThrow(/cannot read/);
  });
});
