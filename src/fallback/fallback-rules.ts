import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type { InferenceOutput } from "../contracts/inference.js";
import { SluiceError } from "../sluice-error.js";

/**
 * The fallback rules of a classification model (docs/lanes.md, "Fallback"): an ordered list of
 * rules, each a regular expression or a keyword list with the label and scores it answers, plus a
 * default. The first rule that matches a request's text answers it; no match gives the default.
 * Loaded and validated once, at start; a bad file stops with CONFIG_INVALID naming the file and rule.
 *
 * ```yaml
 * rules:
 *   - name: threats               # optional, used in error messages
 *     keywords: [kill, hurt]      # whole words, case-insensitive
 *     label: block
 *     scores: { block: 0.9, allow: 0.1 }
 *   - regex: "\\bfree money\\b"   # JavaScript syntax; flags default "iu"
 *     flags: "iu"
 *     label: review
 *     scores: { review: 0.7, allow: 0.3 }
 * default:
 *   label: allow
 *   scores: { allow: 0.6, block: 0.4 }
 * ```
 */
const scoresSchema = z
  .record(z.string().min(1), z.number().finite().min(0).max(1))
  .refine((s) => Object.keys(s).length > 0, { message: "scores must name at least one label" });

const answerFields = {
  label: z.string().min(1),
  scores: scoresSchema,
};

const ruleSchema = z
  .strictObject({
    name: z.string().min(1).optional(),
    regex: z.string().min(1).optional(),
    flags: z
      .string()
      .regex(/^[imsuv]*$/, "flags may use only i, m, s, u and v")
      .optional(),
    keywords: z.array(z.string().min(1)).min(1).optional(),
    ...answerFields,
  })
  .refine((r) => (r.regex === undefined) !== (r.keywords === undefined), {
    message: "a rule needs exactly one of regex or keywords",
  })
  .refine((r) => r.flags === undefined || r.regex !== undefined, { message: "flags apply to regex only" })
  .refine((r) => r.label in r.scores, { message: "scores must include the rule's label" });

const fileSchema = z.strictObject({
  rules: z.array(ruleSchema).default([]),
  default: z
    .strictObject(answerFields)
    .refine((d) => d.label in d.scores, { message: "scores must include the default's label" }),
});

interface CompiledRule {
  name: string;
  pattern: RegExp;
  output: InferenceOutput;
}

export class FallbackRules {
  private constructor(
    /** Absolute path of the file the rules came from. */
    readonly path: string,
    private readonly rules: CompiledRule[],
    private readonly fallbackOutput: InferenceOutput,
  ) {}

  /** Reads and validates a rules file; throws CONFIG_INVALID naming the file (and the rule). */
  static load(path: string, cwd = process.cwd()): FallbackRules {
    const file = resolve(cwd, path);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw invalid(file, `cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    return FallbackRules.parse(text, file);
  }

  /** Validates rules given as YAML text; `file` names them in errors. */
  static parse(text: string, file: string): FallbackRules {
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (error) {
      throw invalid(file, `not valid YAML: ${error instanceof Error ? error.message : String(error)}`);
    }
    const parsed = fileSchema.safeParse(doc);
    if (!parsed.success) {
      const issue = parsed.error.issues[0] as z.core.$ZodIssue;
      throw invalid(file, `${where(issue.path, doc)}: ${issue.message}`);
    }
    const rules = parsed.data.rules.map((rule, i): CompiledRule => {
      const name = rule.name ?? `#${i + 1}`;
      let pattern: RegExp;
      try {
        pattern =
          rule.regex !== undefined
            ? new RegExp(rule.regex, rule.flags ?? "iu")
            : keywordPattern(rule.keywords as string[]);
      } catch (error) {
        throw invalid(
          file,
          `rules[${i}] (${name}): regex is not a valid JavaScript regular expression: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      return { name, pattern, output: { label: rule.label, scores: { ...rule.scores } } };
    });
    const d = parsed.data.default;
    return new FallbackRules(file, rules, { label: d.label, scores: { ...d.scores } });
  }

  get size(): number {
    return this.rules.length;
  }

  /** Every label the rules can answer (for checking them against the model's labels). */
  labels(): string[] {
    const all = new Set<string>();
    for (const out of [...this.rules.map((r) => r.output), this.fallbackOutput])
      for (const label of Object.keys(out.scores ?? {})) all.add(label);
    return [...all];
  }

  /** The first matching rule's output, else the default's. A non-string text gets the default. */
  answer(text: unknown): { output: InferenceOutput; rule: string } {
    if (typeof text === "string") {
      for (const r of this.rules) {
        r.pattern.lastIndex = 0;
        if (r.pattern.test(text)) return { output: copy(r.output), rule: r.name };
      }
    }
    return { output: copy(this.fallbackOutput), rule: "default" };
  }
}

/** Whole-word, case-insensitive alternation of literal keywords (letters/digits end a word). */
function keywordPattern(keywords: readonly string[]): RegExp {
  const escaped = keywords.map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})(?![\\p{L}\\p{N}])`, "iu");
}

function copy(out: InferenceOutput): InferenceOutput {
  return { label: out.label as string, scores: { ...out.scores } };
}

/** `rules[2] (threats).scores` for an issue path; names the rule by its name when it has one. */
function where(path: readonly PropertyKey[], doc: unknown): string {
  if (path.length === 0) return "the file";
  const [head, index, ...rest] = path;
  if (head === "rules" && typeof index === "number") {
    const rule = (doc as { rules?: { name?: unknown }[] }).rules?.[index];
    const name = typeof rule?.name === "string" ? ` (${rule.name})` : "";
    return `rules[${index}]${name}${rest.length > 0 ? `.${rest.map(String).join(".")}` : ""}`;
  }
  return path.map(String).join(".");
}

function invalid(file: string, problem: string): SluiceError {
  return new SluiceError(
    "CONFIG_INVALID",
    `fallback rules file ${file}: ${problem}; fix the file or unset fallback.rulesPath`,
    { context: { file } },
  );
}
