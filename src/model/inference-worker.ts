/**
 * Worker-thread entry: owns one onnxruntime-node session, because `session.run()` blocks its thread in
 * native code (docs/design.md §3). Inputs arrive and outputs leave as transferred typed arrays (no copies).
 * Post-processing (pooling, softmax) happens here too, so only [rows, dim] floats cross back.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { parentPort, threadId, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import { softmaxRows } from "./tasks/classification-task.js";
import { poolEmbeddings } from "./tasks/embedding-task.js";
import { runFeeds } from "./tasks/tensor-task.js";
import { statFields, ThreadCpuClock } from "./thread-cpu-clock.js";
import {
  transferablesOf,
  type WorkerFeedsRequest,
  type WorkerHello,
  type WorkerInit,
  type WorkerReply,
  type WorkerRunRequest,
} from "./worker-protocol.js";

/** SCHED_IDLE in /proc/<tid>/stat's `policy` field (41) and in sched_setscheduler(2). */
const SCHED_IDLE = 5;
const init = workerData as WorkerInit;
const port = parentPort!;
// Before the session: ORT's pool threads inherit this thread's nice value (docs/lanes.md, "Backfill
// workers"). On Linux the nice value is per thread, so this lowers only this worker; elsewhere
// setpriority(0) would lower the whole process, so it is left alone.
const nice = lowerPriority(init.nice);
// Before the session too: ORT's pool threads inherit the scheduling policy (docs/lanes.md, "Backfill workers").
const schedIdle = init.schedIdle === true && enterSchedIdle();
// Before the session: its ORT pool threads inherit this thread's name (thread-cpu-clock.ts).
const cpuClock = ThreadCpuClock.start({ intraOpThreads: init.intraOpThreads, workerId: threadId });
/** `InferenceSession.create`'s path and bytes overloads as one signature. */
const createSession = ort.InferenceSession.create as (
  model: string | Uint8Array,
  options: ort.InferenceSession.SessionOptions,
) => Promise<ort.InferenceSession>;

async function main(): Promise<void> {
  let session: ort.InferenceSession;
  try {
    session = await createSession(init.modelBytes ?? init.modelPath, {
      intraOpNumThreads: init.intraOpThreads,
      interOpNumThreads: init.interOpThreads,
      executionMode: "sequential",
      graphOptimizationLevel: "all",
      // Failures reach the caller as per-item INFERENCE_FAILED outcomes; ORT's own stderr copy would
      // only duplicate them (and could echo tensor details), so keep it to fatal errors.
      logSeverityLevel: 4,
      // ORT's pool threads spin-wait for work by default, burning a core between calls; on a small
      // shared machine that starves Kafka I/O. Config key from onnxruntime_session_options_config_keys.h.
      extra: { session: { intra_op: { allow_spinning: init.allowSpinning ? "1" : "0" } } },
    });
  } catch (error) {
    post({ type: "init-failed", message: String(error) });
    return;
  }
  const meta = (list: readonly ort.InferenceSession.ValueMetadata[]) =>
    list.map((m) => ({
      name: m.name,
      type: m.isTensor ? String(m.type) : "non-tensor",
      shape: m.isTensor ? [...m.shape] : [],
    }));
  cpuClock.adoptPoolThreads();
  post({
    type: "ready",
    inputs: meta(session.inputMetadata),
    outputs: meta(session.outputMetadata),
    cpuSource: cpuClock.source,
    nice,
    schedIdle,
  });

  // One call at a time, in arrival order (the pool posts up to two): `session.run()` yields before its
  // native part, so a request started at once would interleave with the running call; each call's CPU
  // is then its own (and the wall estimate's windows do not overlap and count twice).
  let previous: Promise<void> = Promise.resolve();
  port.on("message", (request: WorkerRunRequest | WorkerFeedsRequest) => {
    previous = previous.then(() =>
      ("feeds" in request ? runTensors(session, request) : run(session, request)).then(
        post,
        (error: unknown) =>
          post({
            type: "failed",
            id: request.id,
            message: error instanceof Error ? error.message : String(error),
          }),
      ),
    );
  });
}

/** A tensor call (named feeds), charged on the worker's thread clock like a text call. */
async function runTensors(session: ort.InferenceSession, request: WorkerFeedsRequest): Promise<WorkerReply> {
  const cpuStarted = cpuClock.nowMs();
  const reply = await runFeeds(session, request);
  return reply.type === "outputs" ? { ...reply, cpuMs: cpuClock.chargeCall(cpuStarted) } : reply;
}

async function run(session: ort.InferenceSession, request: WorkerRunRequest): Promise<WorkerReply> {
  const started = performance.now();
  const cpuStarted = cpuClock.nowMs();
  const dims = [request.rows, request.seqLen];
  const feeds: Record<string, ort.Tensor> = {
    [request.feedNames.inputIds]: new ort.Tensor("int64", request.inputIds, dims),
    [request.feedNames.attentionMask]: new ort.Tensor("int64", request.attentionMask, dims),
  };
  if (request.feedNames.tokenTypeIds !== null) {
    // Single-sequence inputs: every token has type 0.
    feeds[request.feedNames.tokenTypeIds] = new ort.Tensor(
      "int64",
      new BigInt64Array(request.rows * request.seqLen),
      dims,
    );
  }
  const outputs = await session.run(feeds, [request.outputName]);
  const tensor = outputs[request.outputName];
  if (tensor === undefined) throw new Error(`model returned no output named ${request.outputName}`);
  if (tensor.type !== "float32")
    throw new Error(`output ${request.outputName} is ${tensor.type}, expected float32`);
  const data = tensor.data as Float32Array;
  const result =
    init.task === "embedding"
      ? poolEmbeddings(data, tensor.dims, request.attentionMask, init.pooling, init.normalize)
      : softmaxRows(data, tensor.dims);
  return {
    type: "done",
    id: request.id,
    data: result.data,
    dim: result.dim,
    runMs: performance.now() - started,
    cpuMs: cpuClock.chargeCall(cpuStarted),
  };
}

/**
 * Lowers this thread's priority by `steps` nice steps below the process's (Linux only) and returns
 * the nice value the kernel then reports.
 */
function lowerPriority(steps: number): number {
  if (process.platform !== "linux") return 0;
  try {
    const base = getPriority(0);
    if (steps > 0) setPriority(0, Math.min(19, base + steps));
    return getPriority(0);
  } catch {
    // Not permitted here (a seccomp profile): the worker runs at the process's priority; `nice` says so.
    return 0;
  }
}

/**
 * Moves this thread (only) to Linux's SCHED_IDLE policy with util-linux's `chrt --idle --pid 0 <tid>`
 * (Node.js has no sched_setscheduler), and returns whether the kernel now reports it. Lowering one's
 * own policy needs no privilege; without chrt, off Linux, or refused, the thread keeps its nice value.
 */
function enterSchedIdle(): boolean {
  if (process.platform !== "linux") return false;
  try {
    const tid = readlinkSync("/proc/thread-self").split("/").at(-1) as string;
    spawnSync("chrt", ["--idle", "--pid", "0", tid], { stdio: "ignore", timeout: 5000 });
    return Number(statFields(readFileSync("/proc/thread-self/stat", "utf8")).field(41)) === SCHED_IDLE;
  } catch {
    return false;
  }
}

function post(reply: WorkerReply | WorkerHello): void {
  if (reply.type === "done") port.postMessage(reply, [reply.data.buffer as ArrayBuffer]);
  else if (reply.type === "outputs") port.postMessage(reply, transferablesOf(reply.outputs));
  else port.postMessage(reply);
}

void main();
