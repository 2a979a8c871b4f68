import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { SluiceError } from "../sluice-error.js";
import { addModelFlags, type ModelFlags, openModel } from "./model-command.js";

export function register(program: Command): void {
  addModelFlags(
    program
      .command("infer")
      .description(
        "Run the model on one text (--text) or one V2 inference request (--v2) and print the result as JSON",
      ),
  )
    .option("--text <text>", "the input text")
    .option("--v2 <json>", "a V2 (Open Inference Protocol) request as JSON, or @file; prints a V2 response")
    .action(async (flags: ModelFlags & { text?: string; v2?: string }, command: Command) => {
      if ((flags.text === undefined) === (flags.v2 === undefined)) {
        throw new SluiceError("CONFIG_INVALID", "give exactly one of --text or --v2");
      }
      const { decodeV2Request, encodeV2Result } = await import("../contracts/v2-json-codec.js");
      const { statusOf } = await import("../delivery/result-builder.js");
      const { modelInputOf } = await import("../model/model-port.js");
      let input: unknown = flags.text;
      let requestId = "infer";
      if (flags.v2 !== undefined) {
        const raw = flags.v2.startsWith("@")
          ? readFileSync(flags.v2.slice(1))
          : Buffer.from(flags.v2, "utf8");
        const decoded = decodeV2Request(raw, { "x-request-id": requestId });
        if (!decoded.ok) {
          process.stdout.write(`${JSON.stringify({ status: "error", error: decoded })}\n`);
          process.exitCode = 1;
          return;
        }
        requestId = decoded.request.id;
        input = decoded.request;
      }
      const model = await openModel(command, flags);
      try {
        const fed = flags.v2 === undefined ? input : modelInputOf(model.task, input as never);
        const { outcomes, stats } = await model.run([fed]);
        const outcome = outcomes[0]!;
        const inferenceMs = Math.round(stats.inferenceMs * 1000) / 1000;
        if (!outcome.ok) process.exitCode = 1;
        if (flags.v2 !== undefined) {
          const now = Date.now();
          const { value } = encodeV2Result({
            id: requestId,
            status: statusOf(outcome),
            output: outcome.ok ? outcome.output : null,
            model: model.identity,
            source: { topic: "", partition: 0, offset: "0" },
            timing: { requestTimestamp: now, queueMs: 0, inferenceMs, batchSize: 1, completedAt: now },
            attributes: null,
            error: outcome.ok ? null : { code: outcome.code, message: outcome.message },
          });
          process.stdout.write(`${value.toString("utf8")}\n`);
          return;
        }
        const result = outcome.ok
          ? {
              status: "ok",
              output: outcome.output,
              model: model.identity,
              tokens: outcome.tokens,
              truncated: outcome.truncated,
              inferenceMs,
            }
          : {
              // The same status serve gives this outcome (EMPTY_TEXT → rejected, model failure → error).
              status: statusOf(outcome),
              output: null,
              model: model.identity,
              error: { code: outcome.code, message: outcome.message },
            };
        process.stdout.write(`${JSON.stringify(result)}\n`);
      } finally {
        await model.close();
      }
    });
}
