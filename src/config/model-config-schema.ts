import { z } from "zod";
import { positiveInt } from "./config-fields.js";

/** The `model` section: the ONNX model, its tokenizer and its workers (docs/configuration.md). */
/** The model inputs Sluice feeds, by their usual names; `model.inputNames` maps them to the model's. */
export const MODEL_INPUTS = ["input_ids", "attention_mask", "token_type_ids"] as const;

export const modelSchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .default("bge-small-en-v1.5-q")
      .describe(
        "Model name reported in results (the default model's; set it when model.path names another model).",
      ),
    path: z
      .string()
      .min(1)
      .optional()
      .describe("ONNX model file; unset = the default model fetched by `sluice model fetch` under models/."),
    tokenizerPath: z
      .string()
      .min(1)
      .optional()
      .describe("tokenizer.json; unset = tokenizer.json next to the model file (the default model has one)."),
    task: z
      .enum(["embedding", "classification", "tensor"])
      .default("embedding")
      .describe(
        "What the model computes: embedding or classification of text (tokenizer), or tensor = any ONNX model fed named tensors (V2 requests, no tokenizer).",
      ),
    pooling: z.enum(["cls", "mean"]).default("cls").describe("Embedding pooling (BGE uses cls)."),
    normalize: z.boolean().default(true).describe("L2-normalise embeddings."),
    maxSequenceTokens: positiveInt()
      .max(8192)
      .default(256)
      .describe(
        "Longer inputs are truncated to this many tokens, special tokens included (at most 8192; loading the model fails if its special tokens leave no room for text).",
      ),
    labels: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe(
        "Class labels for classification, in output order; unset = the model's metadata, else LABEL_i.",
      ),
    inputNames: z
      .partialRecord(z.enum(MODEL_INPUTS), z.string().min(1))
      .optional()
      .describe(
        "Map from logical input (input_ids, attention_mask, token_type_ids) to the model's input name.",
      ),
    outputName: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Model output to read; unset = last_hidden_state or sentence_embedding (embedding), logits (classification), else the first output.",
      ),
    workers: z
      .union([z.literal("auto"), positiveInt().max(64)])
      .default("auto")
      .describe("Inference worker threads: a number (1..64), or auto = available cores − 1, at least 1."),
    intraOpThreads: positiveInt()
      .max(64)
      .default(1)
      .describe("onnxruntime intra-op threads per worker (1..64)."),
    interOpThreads: positiveInt()
      .max(64)
      .default(1)
      .describe("onnxruntime inter-op threads per worker (1..64; sequential execution uses one)."),
    allowSpinning: z
      .boolean()
      .default(false)
      .describe(
        "Let onnxruntime's pool threads spin-wait between calls (lower latency, burns CPU that Kafka I/O needs on small machines).",
      ),
    backfillWorkers: z
      .union([z.literal("auto"), z.number().int().min(0).max(64)])
      .default("auto")
      .describe(
        "Worker threads that run only backfill-lane calls, at the lower CPU priority model.backfillNice, so an online call never waits behind a backfill call and gets the CPU first: a number (0..64; 0 = backfill calls share the online workers, limited by the SLO guard alone), or auto = as many as model.workers when the instance has a backfill lane (topics.backfill), else 0. Each is one more model session in memory (docs/lanes.md).",
      ),
    backfillNice: z
      .number()
      .int()
      .min(0)
      .max(19)
      .default(10)
      .describe(
        "How many nice steps the backfill workers' threads run below the rest of the process (0..19, capped at nice 19; Linux): when both want a core, the kernel gives a thread about 9× the CPU of one 10 steps lower, across the processes that share a CPU cgroup (several instances in one pod or on one host). 0 = same priority (docs/lanes.md).",
      ),
    backfillScheduling: z
      .enum(["idle", "nice"])
      .default("nice")
      .describe(
        "How the backfill workers' threads yield the CPU (Linux): idle = Linux's SCHED_IDLE policy (set with util-linux's chrt): they run only on a CPU nothing else wants, and any other thread that wakes takes the CPU from them at once, whatever its process, session or cgroup; nice = model.backfillNice alone, which orders threads only within one session's autogroup or one cgroup. Where SCHED_IDLE cannot be set (no chrt, refused) the workers keep model.backfillNice and the model loaded log line says so. Default nice: idle did not prevent the broker stalls measured beside backfills (docs/lanes.md).",
      ),
    backfillSliceRows: positiveInt()
      .max(4096)
      .default(4)
      .describe("Most rows per ORT call of a backfill batch (1..4096); see backfillSliceMs (docs/lanes.md)."),
    backfillSliceMs: positiveInt()
      .max(10_000)
      .default(20)
      .describe(
        "Time budget of one backfill ORT call, ms (1..10000): rows per slice = budget ÷ measured ms per padded token ÷ length, at least 1, at most backfillSliceRows. Bounds how long an online call waits for a busy worker, whatever the text length (docs/lanes.md).",
      ),
    textPrefix: z
      .string()
      .default("")
      .describe("Prepended to every input text (e.g. a retrieval instruction)."),
    itemIsolation: z
      .enum(["auto", "always", "never"])
      .default("auto")
      .describe(
        "Run each item in its own ORT call: auto = only for models whose outputs depend on batch neighbours (per-tensor dynamic int8 quantization), so results never depend on batch composition; never = always batch (faster, small numeric drift on such models).",
      ),
    onnxruntimeTelemetry: z
      .boolean()
      .default(false)
      .describe(
        "Let onnxruntime run Microsoft's usage telemetry (a device id and event cache under ~/.cache/Microsoft/DeveloperTools, uploads). Off: Sluice sets ORT_DISABLE_TELEMETRY=1.",
      ),
  })
  .describe("The ONNX model and its tokenizer.");

/**
 * The `candidate` section (docs/model-upgrades.md): a second model loaded beside the serving one, with
 * every key of `model` (each unset key defaults as it does there) plus `shadowShare`. Absent = no
 * candidate. Online requests are answered by the model the group's last decision names (`sluice model
 * promote|rollback`; none = `model`); a backfill run names its model at submit (`--model candidate`).
 */
export const candidateSchema = modelSchema
  .extend({
    shadowShare: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe(
        "Share of online requests (0..1, picked by a hash of the request id) also scored by the candidate, off the online path; results go to topics.shadowResults (docs/model-upgrades.md).",
      ),
  })
  .describe(
    "A candidate model loaded beside the serving one (same keys as model, plus shadowShare); absent = none (docs/model-upgrades.md).",
  );
