import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { padSequences } from "../../../src/model/batch-planner.js";
import { type InferenceJob, InferenceWorkerPool } from "../../../src/model/inference-worker-pool.js";
import { statFields, WORKER_THREAD_NAME_PREFIX } from "../../../src/model/thread-cpu-clock.js";
import { createTinyModel, tinyClassifierReference, tinyTokenIds } from "../../support/tiny-onnx.js";

let dir: string;
let modelPath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-pool-"));
  modelPath = (await createTinyModel(dir, { task: "classification" })).modelPath;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function job(text: string): InferenceJob {
  const ids = Int32Array.from(tinyTokenIds(text));
  const { inputIds, attentionMask } = padSequences([ids], ids.length);
  return {
    rows: 1,
    seqLen: ids.length,
    inputIds,
    attentionMask,
    feedNames: { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: null },
    outputName: "logits",
  };
}

const init = () => ({
  modelPath,
  intraOpThreads: 1,
  interOpThreads: 1,
  allowSpinning: false,
  task: "classification" as const,
  pooling: "cls" as const,
  normalize: false,
  nice: 0,
});

/** Nice value of one of this process's threads (Linux /proc). */
function niceOfThread(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

/**
 * Scheduling policies (stat field 41; 5 = SCHED_IDLE) of this process's inference worker threads. The
 * unit project runs other files' threads in this process too: one that ends while it is read is skipped.
 */
function policyOfWorkerThreads(): number[] {
  const policies: number[] = [];
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const { comm, field } = statFields(readFileSync(`/proc/self/task/${tid}/stat`, "utf8"));
      if (comm.startsWith(WORKER_THREAD_NAME_PREFIX)) policies.push(Number(field(41)));
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return policies;
}

/** Nice values of this process's inference worker threads (named sluice-infer-*, thread-cpu-clock.ts). */
function niceOfWorkerThreads(): number[] {
  if (process.platform !== "linux") return [];
  return readdirSync("/proc/self/task")
    .map(Number)
    .filter((tid) =>
      readFileSync(`/proc/self/task/${tid}/comm`, "utf8").startsWith(WORKER_THREAD_NAME_PREFIX),
    )
    .map(niceOfThread);
}

describe("InferenceWorkerPool", () => {
  it("transfers input buffers to the worker (no copy) and returns probabilities", async () => {
    const pool = await InferenceWorkerPool.start(init(), 1);
    try {
      expect(pool.inputs.map((i) => i.name)).toEqual(["input_ids", "attention_mask"]);
      const j = job("good movie");
      const pending = pool.run(j);
      // Transferred ArrayBuffers are detached on the sending side.
      expect(j.inputIds.byteLength).toBe(0);
      expect(j.attentionMask.byteLength).toBe(0);
      const result = await pending;
      expect(result.dim).toBe(3);
      const expected = tinyClassifierReference(tinyTokenIds("good movie"));
      [...result.data].forEach((p, c) => {
        expect(p).toBeCloseTo(expected[c]!, 6);
      });
    } finally {
      await pool.close();
    }
  });

  it("queues more jobs than workers and answers each with its own result", async () => {
    const pool = await InferenceWorkerPool.start(init(), 2);
    try {
      expect(pool.size).toEqual({ online: 2, backfill: 0 });
      const texts = Array.from(
        { length: 20 },
        (_, i) => ["good", "bad movie", "the cat sat on the mat"][i % 3]!,
      );
      const results = await Promise.all(texts.map((t) => pool.run(job(t))));
      results.forEach((r, i) => {
        const expected = tinyClassifierReference(tinyTokenIds(texts[i]!));
        expect(r.data[0]).toBeCloseTo(expected[0]!, 6);
      });
    } finally {
      await pool.close();
    }
  });

  it("close rejects queued jobs, is idempotent, and refuses new ones", async () => {
    const pool = await InferenceWorkerPool.start(init(), 1);
    const jobs = Array.from({ length: 5 }, () =>
      pool.run(job("the cat")).then(
        () => "ok",
        (e) => e.code,
      ),
    );
    await Promise.all([pool.close(), pool.close()]);
    const outcomes = await Promise.all(jobs);
    // The jobs already in the worker (it holds two: the one it runs and the next) may finish first;
    // every other one is refused as INTERNAL.
    expect(outcomes.filter((o) => o === "INTERNAL").length).toBeGreaterThanOrEqual(3);
    expect(outcomes.every((o) => o === "INTERNAL" || o === "ok")).toBe(true);
    await expect(pool.run(job("the cat"))).rejects.toMatchObject({ code: "INTERNAL" });
  });

  it("a worker that dies fails only its in-flight job and is replaced", async () => {
    const pool = await InferenceWorkerPool.start(init(), 1);
    try {
      const inFlight = pool.run(job("good movie"));
      // Simulate a crash: reach the private worker (no public seam on purpose) and deliver the 'exit'
      // a dead thread emits. Terminating the thread for real while it runs ORT raced the tiny model's
      // reply (seen once in CI) and, when the stop landed inside native ORT code, aborted the whole
      // test process (onnxruntime-node throws from a finalizer). The pool reacts to 'exit' alone.
      const slots = Reflect.get(pool, "slots") as { worker: Worker }[];
      const old = slots[0]!.worker;
      const oldReplied = once(old, "message"); // the thread itself finishes the job; the pool ignores it
      old.emit("exit", 1);
      await expect(inFlight).rejects.toMatchObject({ code: "INFERENCE_FAILED" });
      const next = await pool.run(job("bad movie")); // waits in the queue for the replacement worker
      expect(next.dim).toBe(3);
      expect(pool.size).toEqual({ online: 1, backfill: 0 });
      await oldReplied;
      await old.terminate(); // idle now: a safe stop
    } finally {
      await pool.close();
    }
  });

  it("backfill workers run backfill calls only, at a lower priority, and online calls never wait for them", async () => {
    const pool = await InferenceWorkerPool.start(init(), 1, { workers: 1, nice: 7 });
    try {
      expect(pool.size).toMatchObject({ online: 1, backfill: 1 });
      const threads = niceOfWorkerThreads();
      if (process.platform === "linux") {
        expect(pool.backfillNice).toBe(7);
        // The process's own threads keep their priority; the backfill worker's thread is 7 steps lower.
        expect(threads.filter((n) => n === 7)).toHaveLength(1);
        expect(niceOfThread(process.pid)).toBe(0);
      }
      const slots = Reflect.get(pool, "slots") as { role: string; inFlight: Map<number, unknown> }[];
      const backfillSlot = slots.find((s) => s.role === "backfill")!;
      const onlineSlot = slots.find((s) => s.role === "online")!;
      // A backlog of backfill calls fills the backfill worker (two per worker) and leaves the online
      // worker free: the online call is posted at once, not queued behind them.
      const backfill = Array.from({ length: 6 }, (_, i) => pool.run(job(`the cat ${i}`), "backfill"));
      expect(backfillSlot.inFlight.size).toBe(2);
      expect(onlineSlot.inFlight.size).toBe(0);
      const online = pool.run(job("good movie"), "online");
      expect(onlineSlot.inFlight.size).toBe(1);
      const [first] = await Promise.all([online, ...backfill]);
      expect(first.dim).toBe(3);
    } finally {
      await pool.close();
    }
  });

  it.runIf(process.platform === "linux")(
    "backfill workers take SCHED_IDLE when asked (model.backfillScheduling idle); online workers and the process keep theirs",
    async () => {
      const pool = await InferenceWorkerPool.start(init(), 1, { workers: 1, nice: 3, schedIdle: true });
      try {
        expect(pool.size).toMatchObject({ online: 1, backfill: 1, backfillNice: 3, backfillSchedIdle: true });
        // One worker thread under SCHED_IDLE (5), the online one (and any other pool's) under SCHED_OTHER (0).
        const policies = policyOfWorkerThreads();
        expect(policies.filter((p) => p === 5)).toHaveLength(1);
        expect(policies.every((p) => p === 0 || p === 5)).toBe(true);
        expect(
          Number(statFields(readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8")).field(41)),
        ).toBe(0);
        const backfill = await pool.run(job("the cat"), "backfill");
        expect(backfill.dim).toBe(3);
      } finally {
        await pool.close();
      }
    },
  );

  it("without backfill workers, backfill calls share the online workers", async () => {
    const pool = await InferenceWorkerPool.start(init(), 1);
    try {
      const slots = Reflect.get(pool, "slots") as { inFlight: Map<number, unknown> }[];
      const backfill = Array.from({ length: 3 }, () => pool.run(job("the cat"), "backfill"));
      expect(slots[0]!.inFlight.size).toBe(2);
      await Promise.all(backfill);
    } finally {
      await pool.close();
    }
  });

  it("fails to start with MODEL_LOAD_FAILED for a file ORT cannot load", async () => {
    await expect(
      InferenceWorkerPool.start({ ...init(), modelPath: join(dir, "tokenizer.json") }, 1),
    ).rejects.toMatchObject({
      code: "MODEL_LOAD_FAILED",
    });
  });
});
