import {
  concatBytes,
  lengthDelimited,
  readFields,
  readVarints,
  stringField,
  toInt64,
  varintField,
  type WireField,
} from "./protobuf-wire.js";

/**
 * ZipMap unwrapping: an ai.onnx.ml classifier as skl2onnx exports it by default ends in a ZipMap
 * node, which turns the probabilities tensor [N, C] into a sequence of N maps {class label →
 * probability}. onnxruntime-node cannot return sequences of maps, so at load time the graph is
 * rewritten: the ZipMap node becomes an Identity of its input, and the graph output keeps its name
 * with the type float tensor [N, C]. The class labels (the ZipMap's `classlabels_strings` or
 * `classlabels_int64s`) are returned beside the rewritten bytes, in column order.
 *
 * Only a ZipMap (domain ai.onnx.ml) whose output is a main-graph output and feeds no other node is
 * unwrapped. The edit is on the protobuf wire (protobuf-wire.ts): every field is copied as it came
 * except the rewritten nodes, the changed graph output (and value_info) entries, and the two
 * enclosing messages (graph, model) that hold them; a model without such a ZipMap comes back as the
 * same bytes. Field numbers: https://github.com/onnx/onnx/blob/main/onnx/onnx.proto3
 */
export interface UnwrappedZipMap {
  /** The graph output, same name: now the ZipMap's input tensor, float [N, C]. */
  output: string;
  /** The tensor the ZipMap zipped (the classifier's probabilities). */
  input: string;
  /** Class labels in column order: strings (classlabels_strings) or numbers (classlabels_int64s). */
  labels: string[] | number[];
}

export interface ZipMapUnwrap {
  /** The model to load: the very `bytes` given when nothing was unwrapped. */
  bytes: Uint8Array;
  unwrapped: UnwrappedZipMap[];
}

const MODEL = { graph: 7, opsetImport: 8 } as const;
const GRAPH = { node: 1, output: 12, valueInfo: 13 } as const;
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5, domain: 7 } as const;
const ATTRIBUTE = { name: 1, ints: 8, strings: 9 } as const;
const VALUE_INFO = { name: 1, type: 2 } as const;
const OPSET = { domain: 1, version: 2 } as const;
const FLOAT = 1;
/** Added only when the model imports no default-domain opset (Identity exists since opset 1). */
const IDENTITY_OPSET = 13;

const decoder = new TextDecoder();

interface ParsedNode {
  inputs: string[];
  outputs: string[];
  name: string | undefined;
  opType: string;
  domain: string;
  attributes: WireField[];
}

export function unwrapZipMaps(bytes: Uint8Array): ZipMapUnwrap {
  const text = (f: WireField) => decoder.decode(bytes.subarray(f.start, f.end));
  const sub = (f: WireField) => (f.wireType === 2 ? readFields(bytes, f.start, f.end) : []);
  const verbatim = (f: WireField) => bytes.subarray(f.tagStart, f.end);
  const nameOf = (valueInfo: WireField) => {
    const f = sub(valueInfo).find((x) => x.field === VALUE_INFO.name);
    return f === undefined ? "" : text(f);
  };
  const parseNode = (node: WireField): ParsedNode => {
    const parsed: ParsedNode = {
      inputs: [],
      outputs: [],
      name: undefined,
      opType: "",
      domain: "",
      attributes: [],
    };
    for (const f of sub(node)) {
      if (f.field === NODE.input) parsed.inputs.push(text(f));
      else if (f.field === NODE.output) parsed.outputs.push(text(f));
      else if (f.field === NODE.name) parsed.name = text(f);
      else if (f.field === NODE.opType) parsed.opType = text(f);
      else if (f.field === NODE.domain) parsed.domain = text(f);
      else if (f.field === NODE.attribute) parsed.attributes.push(f);
    }
    return parsed;
  };
  const labelsOf = (node: ParsedNode): string[] | number[] | undefined => {
    for (const attribute of node.attributes) {
      const fields = sub(attribute);
      const name = fields.find((f) => f.field === ATTRIBUTE.name);
      const attrName = name === undefined ? "" : text(name);
      if (attrName === "classlabels_strings")
        return fields.filter((f) => f.field === ATTRIBUTE.strings).map(text);
      if (attrName === "classlabels_int64s")
        return fields
          .filter((f) => f.field === ATTRIBUTE.ints)
          .flatMap((f) => readVarints(bytes, f).map(toInt64));
    }
    return undefined;
  };

  const top = readFields(bytes);
  const graph = top.find((f) => f.field === MODEL.graph && f.wireType === 2);
  if (graph === undefined) return { bytes, unwrapped: [] };
  const graphFields = sub(graph);
  const graphOutputs = new Set(graphFields.filter((f) => f.field === GRAPH.output).map(nameOf));
  const nodes = new Map<WireField, ParsedNode>();
  for (const f of graphFields) if (f.field === GRAPH.node) nodes.set(f, parseNode(f));
  const consumed = new Set([...nodes.values()].flatMap((n) => n.inputs));

  const rewritten = new Map<WireField, UnwrappedZipMap>();
  for (const [field, node] of nodes) {
    if (node.opType !== "ZipMap" || node.domain !== "ai.onnx.ml") continue;
    const [input] = node.inputs;
    const [output] = node.outputs;
    if (node.inputs.length !== 1 || node.outputs.length !== 1 || input === undefined || output === undefined)
      continue;
    if (!graphOutputs.has(output) || consumed.has(output)) continue;
    const labels = labelsOf(node);
    if (labels === undefined || labels.length === 0) continue;
    rewritten.set(field, { output, input, labels });
  }
  if (rewritten.size === 0) return { bytes, unwrapped: [] };

  const classesOf = new Map([...rewritten.values()].map((u) => [u.output, u.labels.length]));
  const newGraph = concatBytes(
    graphFields.map((f) => {
      const zipMap = rewritten.get(f);
      if (zipMap !== undefined) return lengthDelimited(GRAPH.node, identityNode(zipMap, nodes.get(f)!.name));
      if (f.field !== GRAPH.output && f.field !== GRAPH.valueInfo) return verbatim(f);
      const classes = classesOf.get(nameOf(f));
      if (classes === undefined) return verbatim(f);
      // The same ValueInfoProto with its type replaced (its name and doc string copied as they came).
      const fields = sub(f).map((x) =>
        x.field === VALUE_INFO.type ? floatMatrixType(classes) : verbatim(x),
      );
      return lengthDelimited(f.field, concatBytes(fields));
    }),
  );
  const importsDefaultDomain = top.some((f) => {
    if (f.field !== MODEL.opsetImport) return false;
    const domain = sub(f).find((x) => x.field === OPSET.domain);
    return domain === undefined || text(domain) === "";
  });
  const parts = top.map((f) => (f === graph ? lengthDelimited(MODEL.graph, newGraph) : verbatim(f)));
  if (!importsDefaultDomain) {
    parts.push(lengthDelimited(MODEL.opsetImport, varintField(OPSET.version, IDENTITY_OPSET)));
  }
  return { bytes: concatBytes(parts), unwrapped: [...rewritten.values()] };
}

/** NodeProto Identity(input) → output, keeping the ZipMap's node name. */
function identityNode(u: UnwrappedZipMap, name: string | undefined): Uint8Array {
  return concatBytes([
    stringField(NODE.input, u.input),
    stringField(NODE.output, u.output),
    ...(name === undefined ? [] : [stringField(NODE.name, name)]),
    stringField(NODE.opType, "Identity"),
  ]);
}

/**
 * TypeProto field: tensor_type {elem_type FLOAT, shape [N, classes]}, N unnamed and unknown (the
 * rows; ORT reports a dynamic dimension).
 */
function floatMatrixType(classes: number): Uint8Array {
  const unknownDim = lengthDelimited(1, new Uint8Array());
  const classDim = lengthDelimited(1, varintField(1, classes));
  const shape = lengthDelimited(2, concatBytes([unknownDim, classDim]));
  const tensorType = lengthDelimited(1, concatBytes([varintField(1, FLOAT), shape]));
  return lengthDelimited(VALUE_INFO.type, tensorType);
}
