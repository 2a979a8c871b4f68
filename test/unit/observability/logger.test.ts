import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import {
  createLogger,
  effectiveRedactPaths,
  ownFieldsChild,
  REDACTED,
} from "../../../src/observability/logger.js";

const CANARY = "canary-7f3a-PAYLOAD-do-not-log";

function capture(): { lines: string[]; destination: { write(s: string): void } } {
  const lines: string[] = [];
  return { lines, destination: { write: (s: string) => void lines.push(s) } };
}

describe("createLogger", () => {
  it("redacts payload fields by default, at top level, nested and in arrays", () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination }).child({ component: "test" });
    log.info({ text: CANARY, request: { id: "r1", text: CANARY }, requests: [{ text: CANARY }] }, "one");
    log.info({ record: { key: CANARY, value: CANARY }, message: { value: Buffer.from(CANARY) } }, "two");
    log.info({ attributes: { note: CANARY }, item: { attributes: { x: CANARY } } }, "three");
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).not.toContain(CANARY);
    const first = JSON.parse(lines[0]!);
    expect(first.component).toBe("test");
    expect(first.text).toBe(REDACTED);
    expect(first.request).toEqual({ id: "r1", text: REDACTED });
  });

  it("logs payloads only when logPayloads is true, but never secrets", () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination, logPayloads: true });
    log.info({ text: CANARY, kafka: { sasl: { mechanism: "plain", password: "hunter2" } }, password: "pw1" });
    log.info({ sasl: { username: "u", password: "hunter3" }, ssl: { key: "PRIVATE" } });
    expect(lines[0]).toContain(CANARY);
    const all = lines.join("\n");
    for (const secret of ["hunter2", "hunter3", "pw1", "PRIVATE"]) expect(all).not.toContain(secret);
  });

  it("adds configured redaction paths and rejects invalid ones with CONFIG_INVALID", () => {
    const { lines, destination } = capture();
    createLogger({ destination, redactPaths: ["customer.email"] }).info({
      customer: { email: "a@b.c", tier: 1 },
    });
    expect(JSON.parse(lines[0]!).customer).toEqual({ email: REDACTED, tier: 1 });
    expect(effectiveRedactPaths({ logPayloads: true, redactPaths: ["x.y"] })).toContain("x.y");
    expect(() => createLogger({ destination, redactPaths: ["a..b["] })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
    expect(() => createLogger({ destination, level: "loud" as never })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
  });

  it("an own-fields child (the request log) applies only the user's paths; its parent is unchanged", () => {
    const { lines, destination } = capture();
    const root = createLogger({ destination, redactPaths: ["batch.partitions"] });
    const own = ownFieldsChild(root, { component: "batch-log" }, ["batch.partitions"]);
    // Sluice's own fields whose names a payload path would also match are written as they are.
    own.info({ batch: { size: 2, key: "k-hash", partitions: ["requests:0"] } }, "batch");
    root.info({ batch: { key: CANARY } }, "other");
    const [line, other] = lines.map((l) => JSON.parse(l));
    expect(line.component).toBe("batch-log");
    expect(line.batch).toEqual({ size: 2, key: "k-hash", partitions: REDACTED });
    expect(other.batch).toEqual({ key: REDACTED });
    const { lines: plain, destination: d2 } = capture();
    ownFieldsChild(createLogger({ destination: d2 }), { component: "batch-log" }).info({
      batch: { value: 1 },
    });
    expect(JSON.parse(plain[0]!).batch).toEqual({ value: 1 });
  });

  it("respects the level", () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination, level: "warn" });
    log.info("dropped");
    log.warn("kept");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!).msg).toBe("kept");
  });

  it("writes the documented fields on every line: level, time, pid, hostname, component, msg", () => {
    const { lines, destination } = capture();
    createLogger({ destination, base: { instanceId: "i-1" } })
      .child({ component: "stream-processor" })
      .info({ partition: 2 }, "hello");
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({
      level: 30,
      pid: process.pid,
      hostname: hostname(),
      instanceId: "i-1",
      component: "stream-processor",
      partition: 2,
      msg: "hello",
    });
    expect(new Date(line.time).toISOString()).toBe(line.time);
  });
});
