import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { avroType, loadSchema, packageRoot, schemaPath } from "../../../src/contracts/avro-schemas.js";

type Field = { name: string; default?: unknown; doc?: string };

function fieldNames(schema: unknown): string[] {
  return (schema as { fields: Field[] }).fields.map((f) => f.name);
}

describe("avro schemas", () => {
  it("finds the package root from the source tree", () => {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { name: string };
    expect(pkg.name).toBe("sluice");
    expect(schemaPath("inference-request")).toBe(join(packageRoot(), "schemas", "inference-request.avsc"));
  });

  it("request fields match the contract (docs/design.md §4)", () => {
    expect(fieldNames(loadSchema("inference-request"))).toEqual(["id", "text", "deadlineMs", "attributes"]);
    expect(avroType("inference-request").name).toBe("dev.sluice.InferenceRequest");
  });

  it("result fields match InferenceResult", () => {
    expect(fieldNames(loadSchema("inference-result"))).toEqual([
      "id",
      "status",
      "output",
      "model",
      "source",
      "timing",
      "attributes",
      "truncated",
      "error",
      "fallbackReason",
      "runId",
    ]);
  });

  it("every heartbeat field is documented", () => {
    const fields = (loadSchema("freshness-heartbeat") as unknown as { fields: Field[] }).fields;
    expect(fields.length).toBe(10);
    for (const f of fields) expect(f.doc, f.name).toBeTruthy();
  });

  it("optional fields have defaults, so old readers and writers stay compatible", () => {
    const req = (loadSchema("inference-request") as unknown as { fields: Field[] }).fields;
    for (const f of req.filter((x) => x.name === "deadlineMs" || x.name === "attributes")) {
      expect(f.default, f.name).toBeNull();
    }
  });
});
