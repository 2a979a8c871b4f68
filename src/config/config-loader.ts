import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { SluiceError } from "../sluice-error.js";
import { type SluiceConfig, type SluiceConfigInput, sluiceConfigSchema } from "./config-schema.js";
import { readEnvOverrides } from "./env-overrides.js";
import { isSecretKey, MASK } from "./secret-masking.js";

export const DEFAULT_CONFIG_FILE = "sluice.config.yaml";

export interface LoadConfigOptions {
  /**
   * YAML file to read. Default: `SLUICE_CONFIG`, else `sluice.config.yaml` in `cwd`. The default file
   * may be missing (defaults apply); a file named explicitly must exist.
   */
  configPath?: string;
  /** Environment to read `SLUICE_*` overrides and `KAFKA_BROKERS` from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Directory relative paths resolve against. Default `process.cwd()`. */
  cwd?: string;
  /** Applied last (e.g. command-line flags); same shape as the file. */
  overrides?: DeepPartial<SluiceConfigInput>;
}

export type DeepPartial<T> = T extends (infer U)[]
  ? U[]
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

/** Where the effective configuration came from; `sluice config print` shows it. */
export interface ConfigOrigin {
  /** Absolute path of the file that was read, or undefined when none was. */
  file: string | undefined;
  /** Dotted keys set from the environment, with the variable name. */
  env: Map<string, string>;
}

/** Layers: schema defaults < YAML file < environment < `overrides`. Throws SluiceError CONFIG_INVALID. */
export function loadConfig(opts: LoadConfigOptions = {}): SluiceConfig {
  return loadConfigWithOrigin(opts).config;
}

export function loadConfigWithOrigin(opts: LoadConfigOptions = {}): {
  config: SluiceConfig;
  origin: ConfigOrigin;
} {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const explicit = opts.configPath ?? (env["SLUICE_CONFIG"] || undefined);
  const file = resolve(cwd, explicit ?? DEFAULT_CONFIG_FILE);

  let fromFile: Record<string, unknown> = {};
  let readFile: string | undefined;
  if (existsSync(file)) {
    fromFile = readYamlFile(file);
    readFile = file;
  } else if (explicit !== undefined) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `config file ${file} does not exist; fix the --config path or SLUICE_CONFIG, or remove it to use defaults`,
      { context: { file } },
    );
  }

  const fromEnv = readEnvOverrides(env);
  const sources = new Map<string, string>();
  if (readFile) for (const key of leafKeys(fromFile)) sources.set(key, readFile);
  for (const [key, source] of fromEnv.sources) sources.set(key, source);
  const overrides = (opts.overrides ?? {}) as Record<string, unknown>;
  for (const key of leafKeys(overrides)) sources.set(key, "command-line option");

  const merged = deepMerge(deepMerge(fromFile, fromEnv.values), overrides);
  const parsed = sluiceConfigSchema.safeParse(merged);
  if (!parsed.success) {
    throw new SluiceError("CONFIG_INVALID", formatIssues(parsed.error.issues, merged, sources), {
      context: { file: readFile, problems: parsed.error.issues.length },
    });
  }
  return { config: parsed.data, origin: { file: readFile, env: fromEnv.sources } };
}

function readYamlFile(file: string): Record<string, unknown> {
  const text = readFileSync(file, "utf8");
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!;
    throw new SluiceError("CONFIG_INVALID", `config file ${file} is not valid YAML: ${first.message}`, {
      context: { file },
    });
  }
  const value = doc.toJS() as unknown;
  if (value === null || value === undefined) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `config file ${file} must be a YAML mapping of sections (kafka:, topics:, batching:, ...)`,
      { context: { file } },
    );
  }
  return value as Record<string, unknown>;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Objects merge key by key; anything else (lists included) is replaced by the later layer. */
function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    const prev = out[key];
    out[key] = isPlainObject(prev) && isPlainObject(value) ? deepMerge(prev, value) : value;
  }
  return out;
}

function leafKeys(value: Record<string, unknown>, prefix = ""): string[] {
  return Object.entries(value).flatMap(([key, v]) =>
    isPlainObject(v) ? leafKeys(v, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let node = root;
  for (const key of path) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

type SchemaLike = {
  description?: string;
  _zod: {
    def: { type: string; innerType?: SchemaLike; shape?: Record<string, SchemaLike>; options?: SchemaLike[] };
  };
};

function objectShape(schema: SchemaLike | undefined): Record<string, SchemaLike> | undefined {
  let inner = schema;
  // Walk through wrappers (prefault/default/optional) to the object shape; a union (kafka.ssl: a
  // boolean or an object) has the shape of its object member.
  while (inner && inner._zod.def.type !== "object") {
    if (inner._zod.def.type === "union")
      return inner._zod.def.options?.map(objectShape).find((shape) => shape !== undefined);
    inner = inner._zod.def.innerType;
  }
  return inner?._zod.def.shape;
}

/**
 * A union's failure as the member the value was meant for says it (`kafka.ssl` given an object: the
 * object member's issues), so the message names the key and where it came from, not only "Invalid
 * input". A member the value does not even have the type (or, for a literal, the value) of was not
 * meant (a fraction given to an integer member was); if not exactly one member is left, the union's
 * own issue stays.
 */
function meantMemberIssues(issues: z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    if (issue.code !== "invalid_union") return [issue];
    const meant = issue.errors.filter((member) => !member.some(notThisMember));
    if (meant.length !== 1) return [issue];
    return meantMemberIssues(meant[0]!.map((e) => ({ ...e, path: [...issue.path, ...e.path] })));
  });
}

/** An issue saying the value is not of a member's kind at all; a fraction for an integer is (`must be an integer`). */
function notThisMember(e: z.core.$ZodIssue): boolean {
  if (e.path.length > 0) return false;
  if (e.code === "invalid_type") return e.expected !== "int";
  return e.code === "invalid_value";
}

function schemaAt(path: PropertyKey[]): SchemaLike | undefined {
  let schema: SchemaLike | undefined = sluiceConfigSchema as unknown as SchemaLike;
  for (const key of path) schema = objectShape(schema)?.[String(key)];
  return schema;
}

function show(value: unknown): string {
  if (value === undefined) return "(missing)";
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * The value a problem is about: what the user gave, else the key's default (a cross-field rule can
 * fail on a default, e.g. `consumer.sessionTimeoutMs: 2000` against the default heartbeat interval).
 */
function shownValue(issue: z.core.$ZodIssue, input: Record<string, unknown>): string {
  const given = valueAt(input, issue.path);
  if (given !== undefined) return show(given);
  const schema = schemaAt(issue.path) as unknown as z.ZodType | undefined;
  const fallback = schema?.safeParse(undefined);
  return fallback?.success && fallback.data !== undefined
    ? `${show(fallback.data)} (default)`
    : show(undefined);
}

/** zod's wording where it reads like an implementation detail ("expected int, received number"). */
function problem(issue: z.core.$ZodIssue): string {
  if (issue.code === "invalid_type" && issue.expected === "int") return "must be an integer";
  return issue.message;
}

export function formatIssues(
  given: z.core.$ZodIssue[],
  input: Record<string, unknown>,
  sources: Map<string, string>,
): string {
  const issues = meantMemberIssues(given);
  const lines = issues.map((issue) => {
    if (issue.code === "unrecognized_keys") {
      const parent = issue.path.map(String).join(".");
      const keys = issue.keys.map((k) => (parent ? `${parent}.${k}` : k));
      const allowed = Object.keys(objectShape(schemaAt(issue.path)) ?? {}).join(", ");
      return `${keys.join(", ")}: unknown key; allowed keys${parent ? ` in ${parent}` : ""}: ${allowed || "(none)"}`;
    }
    const key = issue.path.map(String).join(".") || "(root)";
    // A secret's value never reaches a message, even when it is the invalid one (an unquoted numeric
    // YAML password is a number, not a string).
    const secret = issue.path.some((k) => isSecretKey(String(k)));
    const raw = valueAt(input, issue.path);
    const quote =
      secret && typeof raw === "number" ? " (quote it in YAML: a bare number is not a string)" : "";
    const source = sources.get(key);
    const meaning = schemaAt(issue.path)?.description;
    return (
      `${key} = ${secret ? show(MASK) : shownValue(issue, input)}${source ? ` (from ${source})` : ""}: ${problem(issue)}${quote}` +
      (meaning ? ` [${key}: ${meaning}]` : "")
    );
  });
  return `invalid configuration (${issues.length} problem${issues.length === 1 ? "" : "s"}):\n  ${lines.join("\n  ")}`;
}
