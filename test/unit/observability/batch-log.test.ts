import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { type MicroBatchReport, SluiceEvents } from "../../../src/events/sluice-events.js";
import { BatchLog } from "../../../src/observability/batch-log.js";
import { createLogger } from "../../../src/observability/logger.js";

const CANARY = "canary-91c2-SECRET-REQUEST-TEXT";

function capture() {
  const lines: string[] = [];
  return { lines, destination: { write: (s: string) => void lines.push(s) } };
}

const report = (over: Partial<MicroBatchReport> = {}): MicroBatchReport => ({
  reason: "size",
  size: 3,
  tokens: 30,
  paddedTokens: 48,
  queueWaitMs: [5, 1, 9],
  inferenceMs: 12.34567,
  ok: 2,
  expired: 1,
  failed: 0,
  requestIds: ["req-1", "req-2", "req-3"],
  sources: [
    { topic: "in", partition: 1 },
    { topic: "in", partition: 0 },
    { topic: "in", partition: 1 },
  ],
  ...over,
});

describe("BatchLog", () => {
  it("writes one line per batch with counts, timings and hashed ids, never the ids themselves", () => {
    const { lines, destination } = capture();
    const logger = createLogger({ destination }).child({ component: "batch-log" });
    const events = new SluiceEvents();
    new BatchLog({ logger }).attach(events);
    events.emit("microbatch.completed", report());
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!);
    expect(line.component).toBe("batch-log");
    expect(line.batch).toEqual({
      reason: "size",
      size: 3,
      ok: 2,
      expired: 1,
      failed: 0,
      tokens: 30,
      paddedTokens: 48,
      paddingRatio: 0.375,
      queueWaitMsP50: 5,
      queueWaitMsMax: 9,
      inferenceMs: 12.346,
      partitions: ["in:0", "in:1"],
      idHashes: ["req-1", "req-2", "req-3"].map((id) =>
        createHash("sha256").update(id).digest("hex").slice(0, 16),
      ),
    });
    expect(lines[0]).not.toContain("req-1");
  });

  it("caps listed ids, supports keyed hashing and skips work above info level", () => {
    const { lines, destination } = capture();
    const keyed = new BatchLog({ logger: createLogger({ destination }), maxIdsPerLine: 2, idHashKey: "k" });
    keyed.write(report());
    const b = JSON.parse(lines[0]!).batch;
    expect(b.idHashes).toHaveLength(2);
    expect(b.idsOmitted).toBe(1);
    expect(b.idHashes[0]).not.toBe(createHash("sha256").update("req-1").digest("hex").slice(0, 16));
    const quiet = capture();
    new BatchLog({ logger: createLogger({ destination: quiet.destination, level: "warn" }) }).write(report());
    expect(quiet.lines).toHaveLength(0);
    expect(() => new BatchLog({ logger: createLogger({ destination }), idHashLength: 4 })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
  });

  it("canary: request text reaches no log line at default settings", () => {
    const { lines, destination } = capture();
    // The real default configuration, as `sluice serve` builds its logger from it.
    const { observability: o } = loadConfig({ env: {}, cwd: mkdtempSync(join(tmpdir(), "sluice-canary-")) });
    expect(o.logPayloads).toBe(false);
    const root = createLogger({
      destination,
      level: o.logLevel,
      logPayloads: o.logPayloads,
      redactPaths: o.redactPaths,
    });
    const events = new SluiceEvents();
    new BatchLog({ logger: root.child({ component: "batch-log" }) }).attach(events);
    events.emit("microbatch.completed", report({ requestIds: ["a", "b", "c"] }));
    // What a careless component might log: the request, the record, the items of a batch.
    const log = root.child({ component: "stream-processor" });
    log.info({ request: { id: "a", text: CANARY } }, "decoded");
    log.warn(
      { record: { key: "a", value: Buffer.from(JSON.stringify({ id: "a", text: CANARY })) } },
      "bad record",
    );
    log.error({ requests: [{ id: "a", text: CANARY }], attributes: { note: CANARY } }, "batch failed");
    log.info({ text: CANARY, item: { text: CANARY } }, "item");
    expect(lines.length).toBe(5);
    for (const line of lines) expect(line).not.toContain(CANARY);
  });
});
