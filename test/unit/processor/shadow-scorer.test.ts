import { describe, expect, it } from "vitest";
import type { AttachedUnit } from "../../../src/delivery/partition-committer.js";
import { isShadowed } from "../../../src/delivery/shadow-agreement.js";
import type { SluiceEventMap } from "../../../src/events/sluice-events.js";
import type { ModelPort } from "../../../src/model/model-port.js";
import type { WorkItem } from "../../../src/processor/request-intake.js";
import { ShadowScorer } from "../../../src/processor/shadow-scorer.js";

/** A candidate whose calls wait until released, so the queue can fill. */
function gatedCandidate() {
  const calls: { size: number; lane: string | undefined }[] = [];
  let release: () => void = () => {};
  const model = {
    identity: { name: "cand", version: "cccccccccccc" },
    task: "embedding",
    countTokens: () => 1,
    async run(texts: readonly unknown[], options?: { lane?: string }) {
      calls.push({ size: texts.length, lane: options?.lane });
      await new Promise<void>((r) => {
        release = r;
      });
      return {
        outcomes: texts.map(() => ({
          ok: true as const,
          output: { embedding: [1, 1] },
          tokens: 1,
          truncated: false,
        })),
        stats: { inferenceMs: 4, realTokens: texts.length, paddedTokens: texts.length, cpuMs: 2 },
      };
    },
    async close() {},
  } as unknown as ModelPort;
  return { model, calls, release: () => release() };
}

const ids = Array.from({ length: 200 }, (_, i) => `q-${i}`).filter((id) => isShadowed(id, 0.5));

function item(id: string, attached: AttachedUnit[], current = () => true): WorkItem {
  return {
    task: {
      tp: { topic: "q", partition: 0 },
      isCurrent: current,
      committer: { attach: (u: AttachedUnit) => attached.push(u) },
    },
    generation: 1,
    source: { offset: "7" },
    timestampMs: 0,
    request: { id, text: "t" },
    lane: "online",
    runId: undefined,
    changelog: [],
    deadlineMs: 0,
    enqueuedAtMs: 0,
    tokens: 1,
  } as unknown as WorkItem;
}

describe("ShadowScorer: off the online path, shed first, counted", () => {
  it("scores picked requests on the candidate's backfill lane, sheds beyond the queue bound, attaches results", async () => {
    const c = gatedCandidate();
    const events: { name: string; payload: unknown }[] = [];
    const scorer = new ShadowScorer({
      candidate: c.model,
      share: 0.5,
      topic: "shadow",
      encode: (r) => ({ value: Buffer.from(JSON.stringify(r)), headers: {} }),
      maxQueued: 3,
      maxBatch: 2,
      clock: { now: () => 10 },
      emit: (name, payload) => events.push({ name, payload }),
    });
    const attached: AttachedUnit[] = [];
    const online = {
      output: { embedding: [1, 0] },
      model: { name: "m", version: "aaaaaaaaaaaa" },
      msPerItem: 1,
      cpuMsPerItem: 0.5,
    };
    // Not picked by the hash: never shadowed.
    const notPicked = Array.from({ length: 200 }, (_, i) => `q-${i}`).find(
      (id) => !isShadowed(id, 0.5),
    ) as string;
    scorer.offer(item(notPicked, attached), online);
    expect(c.calls).toHaveLength(0);
    for (const id of ids.slice(0, 7)) scorer.offer(item(id, attached), online);
    // The first call took the first request; 3 wait; the other 3 were shed.
    expect(c.calls).toEqual([{ size: 1, lane: "backfill" }]);
    const shed = events.filter((e) => e.name === "shadow.dropped");
    expect(shed.length).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) {
      c.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await scorer.idle();
    const scored = events
      .filter((e) => e.name === "shadow.scored")
      .map((e) => e.payload as SluiceEventMap["shadow.scored"]);
    expect(scored.length + shed.length).toBe(7);
    expect(c.calls.every((x) => x.lane === "backfill")).toBe(true);
    expect(scored[0]).toMatchObject({
      ok: true,
      agreement: { measure: "cosine" },
      candidate: { cpuMsPerItem: expect.any(Number) },
    });
    expect(attached).toHaveLength(scored.length);
    expect(attached[0]).toMatchObject({ atOffset: "8", bookkeeping: [] });
    expect(attached[0]?.outputs[0]?.topic).toBe("shadow");
  });

  it("drops (counted) what a revoked partition can no longer commit", async () => {
    const c = gatedCandidate();
    const events: string[] = [];
    const scorer = new ShadowScorer({
      candidate: c.model,
      share: 1,
      topic: "shadow",
      encode: () => ({ value: Buffer.from("x"), headers: {} }),
      maxQueued: 10,
      maxBatch: 10,
      clock: { now: () => 0 },
      emit: (name) => events.push(name),
    });
    let current = true;
    const attached: AttachedUnit[] = [];
    scorer.offer(
      item("a", attached, () => current),
      {
        output: { embedding: [1] },
        model: { name: "m", version: "aaaaaaaaaaaa" },
        msPerItem: 1,
        cpuMsPerItem: undefined,
      },
    );
    current = false;
    c.release();
    await scorer.idle();
    expect(events).toEqual(["shadow.dropped"]);
    expect(attached).toHaveLength(0);
  });
});
