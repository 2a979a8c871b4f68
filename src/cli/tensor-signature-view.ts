import type { TensorModelDescription } from "../model/tensor-model-runner.js";
import { formatDims } from "../model/tensor-signature.js";

/** `sluice model info` for a tensor model: its signature as V2 datatypes and shapes (-1 = dynamic). */
export function tensorSignatureLines(d: TensorModelDescription): string[] {
  const tensor = (t: { name: string; datatype: string; dims: (number | null)[] }) =>
    `${t.name} ${t.datatype}${formatDims(t.dims)}`;
  return [
    `name:        ${d.identity.name}`,
    `version:     ${d.identity.version}`,
    "task:        tensor",
    `inputs:      ${d.signature.inputs.map(tensor).join(", ")}`,
    `outputs:     ${d.signature.outputs.map(tensor).join(", ")}`,
    ...d.signature.outputs.flatMap((o) =>
      o.labels === undefined
        ? []
        : [
            `labels:      ${o.name}: ${o.labels.join(", ")} (a ZipMap's probabilities, unwrapped to a tensor)`,
          ],
    ),
    ...(d.signature.skippedOutputs.length > 0
      ? [`left out:    ${d.signature.skippedOutputs.join(", ")} (sequence/map outputs)`]
      : []),
    `max rows:    ${d.maxRequestRows} per request (batching.maxBatchSize)`,
    `model sha256:     ${d.modelSha256}`,
    `batch-dependent:  ${d.batchDependent ? "yes (dynamic int8 quantization)" : "no"}; requests stacked: ${d.isolateItems ? "no (each alone)" : "yes"}`,
  ];
}
