import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import protobuf from "protobufjs";

/**
 * Builds tiny ONNX models (and a matching word-level WordPiece `tokenizer.json`) whose outputs a test
 * can compute by hand. The weights are exported so tests compute the reference in plain JS.
 * Python's `onnx` package is not reachable here, so the protobuf is written with protobufjs from the
 * subset of `onnx.proto3` below (field numbers from https://github.com/onnx/onnx/blob/main/onnx/onnx.proto3).
 *
 * Classifier:  logits = maskedMean(Emb[input_ids]) · W + B                       → "logits" [batch, 3]
 * Embedding:   h[b,s] = Emb[ids[b,s]] + TypeEmb[tt[b,s]] + maskedMean(Emb[ids[b]]) → "last_hidden_state"
 *              [batch, seq, 4] (the mean term makes CLS pooling content-dependent)
 */
const descriptor = {
  nested: {
    onnx: {
      nested: {
        ModelProto: {
          fields: {
            irVersion: { type: "int64", id: 1 },
            producerName: { type: "string", id: 2 },
            producerVersion: { type: "string", id: 3 },
            domain: { type: "string", id: 4 },
            modelVersion: { type: "int64", id: 5 },
            docString: { type: "string", id: 6 },
            graph: { type: "GraphProto", id: 7 },
            opsetImport: { rule: "repeated", type: "OperatorSetIdProto", id: 8 },
            metadataProps: { rule: "repeated", type: "StringStringEntryProto", id: 14 },
          },
        },
        OperatorSetIdProto: {
          fields: { domain: { type: "string", id: 1 }, version: { type: "int64", id: 2 } },
        },
        StringStringEntryProto: {
          fields: { key: { type: "string", id: 1 }, value: { type: "string", id: 2 } },
        },
        GraphProto: {
          fields: {
            node: { rule: "repeated", type: "NodeProto", id: 1 },
            name: { type: "string", id: 2 },
            initializer: { rule: "repeated", type: "TensorProto", id: 5 },
            docString: { type: "string", id: 10 },
            input: { rule: "repeated", type: "ValueInfoProto", id: 11 },
            output: { rule: "repeated", type: "ValueInfoProto", id: 12 },
          },
        },
        NodeProto: {
          fields: {
            input: { rule: "repeated", type: "string", id: 1 },
            output: { rule: "repeated", type: "string", id: 2 },
            name: { type: "string", id: 3 },
            opType: { type: "string", id: 4 },
            attribute: { rule: "repeated", type: "AttributeProto", id: 5 },
            domain: { type: "string", id: 7 },
          },
        },
        AttributeProto: {
          fields: {
            name: { type: "string", id: 1 },
            f: { type: "float", id: 2 },
            i: { type: "int64", id: 3 },
            s: { type: "bytes", id: 4 },
            t: { type: "TensorProto", id: 5 },
            floats: { rule: "repeated", type: "float", id: 7 },
            ints: { rule: "repeated", type: "int64", id: 8 },
            strings: { rule: "repeated", type: "bytes", id: 9 },
            type: { type: "int32", id: 20 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: "repeated", type: "int64", id: 1 },
            dataType: { type: "int32", id: 2 },
            name: { type: "string", id: 8 },
            rawData: { type: "bytes", id: 9 },
          },
        },
        ValueInfoProto: {
          fields: { name: { type: "string", id: 1 }, type: { type: "TypeProto", id: 2 } },
        },
        TypeProto: {
          fields: {
            tensorType: { type: "TypeProtoTensor", id: 1 },
            sequenceType: { type: "TypeProtoSequence", id: 4 },
            mapType: { type: "TypeProtoMap", id: 5 },
          },
        },
        TypeProtoSequence: { fields: { elemType: { type: "TypeProto", id: 1 } } },
        TypeProtoMap: {
          fields: { keyType: { type: "int32", id: 1 }, valueType: { type: "TypeProto", id: 2 } },
        },
        TypeProtoTensor: {
          fields: { elemType: { type: "int32", id: 1 }, shape: { type: "TensorShapeProto", id: 2 } },
        },
        TensorShapeProto: {
          fields: { dim: { rule: "repeated", type: "Dimension", id: 1 } },
        },
        Dimension: {
          fields: { dimValue: { type: "int64", id: 1 }, dimParam: { type: "string", id: 2 } },
        },
      },
    },
  },
};

/** ONNX `TensorProto.DataType` values used by Sluice. */
export const OnnxDataType = { FLOAT: 1, INT32: 6, INT64: 7 } as const;
/** ONNX `AttributeProto.AttributeType` values used by Sluice. */
export const OnnxAttributeType = { FLOAT: 1, INT: 2, INTS: 7 } as const;

const root = protobuf.Root.fromJSON(descriptor);
export const ModelProto = root.lookupType("onnx.ModelProto");

export const TINY_VOCAB: readonly string[] = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "the",
  "cat",
  "dog",
  "sat",
  "on",
  "mat",
  "good",
  "bad",
  "great",
  "awful",
  "a",
  "is",
  "very",
  "movie",
];
/** A vocabulary word whose id lies outside the embedding table: ORT's Gather fails on it. */
export const TINY_POISON_WORD = "overflow";
export const TINY_HIDDEN = 4;
export const TINY_LABELS = ["negative", "neutral", "positive"] as const;

const V = TINY_VOCAB.length;
/** Emb[v][h], small exact binary fractions so float32 sums stay exact. */
export const TINY_EMBEDDING: number[][] = Array.from({ length: V }, (_, v) =>
  Array.from({ length: TINY_HIDDEN }, (_, h) => (((v * 7 + h * 3) % 11) - 5) / 8),
);
export const TINY_TYPE_EMBEDDING: number[][] = [
  [0.5, -0.25, 0.125, 0],
  [1, 1, 1, 1],
];
/** W[h][c] and B[c] of the classifier head. */
export const TINY_W: number[][] = [
  [1, -1, 0.5],
  [-0.5, 0.25, 1],
  [0.75, 0, -1],
  [0, 0.5, 0.25],
];
export const TINY_B: number[] = [0.1, 0, -0.1];

type Task = "embedding" | "classification";

export interface TinyModelOptions {
  task: Task;
  /** Rename the graph inputs, to exercise `inputNames` mapping. */
  inputNames?: { inputIds?: string; attentionMask?: string; tokenTypeIds?: string };
  /** Store label names in the model's metadata_props (`id2label`, JSON) instead of relying on options. */
  labelsInMetadata?: boolean;
}

export interface TinyModel {
  modelPath: string;
  tokenizerPath: string;
  labels: string[];
}

/** Writes `<dir>/tiny-<task>.onnx` and `<dir>/tokenizer.json`; returns their paths. */
export async function createTinyModel(dir: string, options: TinyModelOptions): Promise<TinyModel> {
  await mkdir(dir, { recursive: true });
  const modelPath = join(dir, `tiny-${options.task}.onnx`);
  const tokenizerPath = join(dir, "tokenizer.json");
  await writeFile(modelPath, buildTinyModelBytes(options));
  await writeFile(tokenizerPath, JSON.stringify(tinyTokenizerJson()));
  return { modelPath, tokenizerPath, labels: [...TINY_LABELS] };
}

export function tinyTokenizerJson(): object {
  const vocab: Record<string, number> = {};
  TINY_VOCAB.forEach((w, i) => {
    vocab[w] = i;
  });
  vocab[TINY_POISON_WORD] = V;
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]")],
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
        { SpecialToken: { id: "[SEP]", type_id: 1 } },
      ],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [2], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [3], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab,
    },
  };
}

/** Token ids the tiny tokenizer produces for ASCII `text` ([CLS] … [SEP], unknown words → [UNK]). */
export function tinyTokenIds(text: string): number[] {
  // BERT pre-tokenisation: runs of letters/digits are words, every other non-space character is its own token.
  const words = text.toLowerCase().match(/[a-z0-9]+|[^\sa-z0-9]/g) ?? [];
  return [2, ...words.map((w) => (w === TINY_POISON_WORD ? V : Math.max(TINY_VOCAB.indexOf(w), 1))), 3];
}

function maskedMean(ids: number[]): number[] {
  const out = new Array<number>(TINY_HIDDEN).fill(0);
  for (const id of ids) for (let h = 0; h < TINY_HIDDEN; h++) out[h]! += TINY_EMBEDDING[id]![h]!;
  return out.map((x) => x / ids.length);
}

/** Reference for the classifier: softmax(maskedMean · W + B). */
export function tinyClassifierReference(ids: number[]): number[] {
  const mean = maskedMean(ids);
  const logits = TINY_B.map((b, c) => b + mean.reduce((s, x, h) => s + x * TINY_W[h]![c]!, 0));
  const max = Math.max(...logits);
  const exps = logits.map((l) => Math.exp(l - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

/** Reference for the embedding model's hidden states (token type 0 everywhere). */
export function tinyHiddenReference(ids: number[]): number[][] {
  const mean = maskedMean(ids);
  return ids.map((id) => TINY_EMBEDDING[id]!.map((x, h) => x + TINY_TYPE_EMBEDDING[0]![h]! + mean[h]!));
}

// ---------------------------------------------------------------------------------------------------

function floatTensor(name: string, dims: number[], values: number[]) {
  return {
    name,
    dims,
    dataType: OnnxDataType.FLOAT,
    rawData: new Uint8Array(new Float32Array(values).buffer),
  };
}

function int64Tensor(name: string, values: number[]) {
  return {
    name,
    dims: [values.length],
    dataType: OnnxDataType.INT64,
    rawData: new Uint8Array(new BigInt64Array(values.map(BigInt)).buffer),
  };
}

export function valueInfo(name: string, elemType: number, dims: (number | string)[]) {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function node(opType: string, input: string[], output: string[], attribute: object[] = []) {
  return { opType, input, output, name: `${opType}_${output[0]}`, attribute };
}

export function buildTinyModelBytes(options: TinyModelOptions): Uint8Array {
  const idsName = options.inputNames?.inputIds ?? "input_ids";
  const maskName = options.inputNames?.attentionMask ?? "attention_mask";
  const typeName = options.inputNames?.tokenTypeIds ?? "token_type_ids";
  const keepdims = options.task === "embedding" ? 1 : 0;
  const nodes = [
    node("Gather", ["emb", idsName], ["E"], [{ name: "axis", i: 0, type: OnnxAttributeType.INT }]),
    node("Cast", [maskName], ["m"], [{ name: "to", i: OnnxDataType.FLOAT, type: OnnxAttributeType.INT }]),
    node("Unsqueeze", ["m", "axis2"], ["m3"]),
    node("Mul", ["E", "m3"], ["Em"]),
    node(
      "ReduceSum",
      ["Em", "axis1"],
      ["sum"],
      [{ name: "keepdims", i: keepdims, type: OnnxAttributeType.INT }],
    ),
    node(
      "ReduceSum",
      ["m3", "axis1"],
      ["cnt"],
      [{ name: "keepdims", i: keepdims, type: OnnxAttributeType.INT }],
    ),
    node("Div", ["sum", "cnt"], ["mean"]),
  ];
  const initializer = [
    floatTensor("emb", [V, TINY_HIDDEN], TINY_EMBEDDING.flat()),
    int64Tensor("axis1", [1]),
    int64Tensor("axis2", [2]),
  ];
  const inputs = [
    valueInfo(idsName, OnnxDataType.INT64, ["batch", "sequence"]),
    valueInfo(maskName, OnnxDataType.INT64, ["batch", "sequence"]),
  ];
  let output: ReturnType<typeof valueInfo>;
  if (options.task === "classification") {
    initializer.push(floatTensor("W", [TINY_HIDDEN, TINY_LABELS.length], TINY_W.flat()));
    initializer.push(floatTensor("B", [TINY_LABELS.length], TINY_B));
    nodes.push(node("MatMul", ["mean", "W"], ["mw"]), node("Add", ["mw", "B"], ["logits"]));
    output = valueInfo("logits", OnnxDataType.FLOAT, ["batch", TINY_LABELS.length]);
  } else {
    inputs.push(valueInfo(typeName, OnnxDataType.INT64, ["batch", "sequence"]));
    initializer.push(floatTensor("typeEmb", [2, TINY_HIDDEN], TINY_TYPE_EMBEDDING.flat()));
    nodes.push(
      node("Gather", ["typeEmb", typeName], ["T"], [{ name: "axis", i: 0, type: OnnxAttributeType.INT }]),
      node("Add", ["E", "T"], ["ET"]),
      node("Add", ["ET", "mean"], ["last_hidden_state"]),
    );
    output = valueInfo("last_hidden_state", OnnxDataType.FLOAT, ["batch", "sequence", TINY_HIDDEN]);
  }
  const metadataProps =
    options.labelsInMetadata === true
      ? [{ key: "id2label", value: JSON.stringify(Object.fromEntries(TINY_LABELS.map((l, i) => [i, l]))) }]
      : [];
  const model = ModelProto.fromObject({
    irVersion: 8,
    producerName: "sluice-tiny-onnx",
    opsetImport: [{ domain: "", version: 13 }],
    metadataProps,
    graph: { name: `tiny_${options.task}`, node: nodes, initializer, input: inputs, output: [output] },
  });
  return ModelProto.encode(model).finish();
}

/** `SLUICE_*` environment that makes `sluice serve` load `tiny`, with small token limits to match. */
export function tinyModelEnv(tiny: TinyModel): Record<string, string> {
  return {
    SLUICE_MODEL__PATH: tiny.modelPath,
    SLUICE_MODEL__TOKENIZER_PATH: tiny.tokenizerPath,
    SLUICE_MODEL__NAME: "tiny",
    SLUICE_MODEL__MAX_SEQUENCE_TOKENS: "32",
    SLUICE_BATCHING__MAX_BATCH_TOKENS: "1024",
  };
}

/** A `sluice.yaml` (config file text) whose model section loads `tiny`. */
export function tinyModelConfigYaml(tiny: TinyModel): string {
  return `model:\n  name: tiny\n  path: ${tiny.modelPath}\n  tokenizerPath: ${tiny.tokenizerPath}\n`;
}
