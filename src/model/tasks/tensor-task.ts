/**
 * The worker side of `model.task: tensor`: named feeds go into one ORT call as they are, and the
 * requested outputs come back as they are (no pooling, no softmax). Runs on the worker thread.
 */
import * as ort from "onnxruntime-node";
import type {
  FeedData,
  FeedElementType,
  WorkerFeed,
  WorkerFeedsRequest,
  WorkerReply,
} from "../worker-protocol.js";

export async function runFeeds(
  session: ort.InferenceSession,
  request: WorkerFeedsRequest,
): Promise<WorkerReply> {
  const started = performance.now();
  const feeds: Record<string, ort.Tensor> = {};
  for (const f of request.feeds) {
    feeds[f.name] = new ort.Tensor(f.type, f.data as ort.Tensor.DataType, f.dims);
  }
  const results = await session.run(feeds, request.outputNames);
  const outputs: WorkerFeed[] = request.outputNames.map((name) => {
    const t = results[name];
    if (t === undefined) throw new Error(`model returned no output named ${name}`);
    const data = t.data as FeedData;
    // Copies: ORT's buffers may be shared between outputs, and each one is transferred on its own.
    return {
      name,
      type: t.type as FeedElementType,
      dims: [...t.dims],
      data: Array.isArray(data) ? [...data] : (data.slice() as FeedData),
    };
  });
  // cpuMs is the caller's (the worker charges the call on its thread clock).
  return { type: "outputs", id: request.id, outputs, runMs: performance.now() - started, cpuMs: 0 };
}
