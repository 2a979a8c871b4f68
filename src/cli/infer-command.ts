import type { Command } from "commander";
import { statusOf } from "../delivery/result-builder.js";
import { addModelFlags, type ModelFlags, openModel } from "./model-command.js";

export function register(program: Command): void {
  addModelFlags(
    program.command("infer").description("Run the model on one text and print the result as JSON"),
  )
    .requiredOption("--text <text>", "the input text")
    .action(async (flags: ModelFlags & { text: string }, command: Command) => {
      const model = await openModel(command, flags);
      try {
        const { outcomes, stats } = await model.run([flags.text]);
        const outcome = outcomes[0]!;
        const result = outcome.ok
          ? {
              status: "ok",
              output: outcome.output,
              model: model.identity,
              tokens: outcome.tokens,
              truncated: outcome.truncated,
              inferenceMs: Math.round(stats.inferenceMs * 1000) / 1000,
            }
          : {
              // The same status serve gives this outcome (EMPTY_TEXT → rejected, model failure → error).
              status: statusOf(outcome),
              output: null,
              model: model.identity,
              error: { code: outcome.code, message: outcome.message },
            };
        process.stdout.write(`${JSON.stringify(result)}\n`);
        if (!outcome.ok) process.exitCode = 1;
      } finally {
        await model.close();
      }
    });
}
