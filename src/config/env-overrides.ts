import type { z } from "zod";
import { SluiceError } from "../sluice-error.js";
import { sluiceConfigSchema } from "./config-schema.js";

/**
 * Environment overrides: `SLUICE_<SECTION>__<KEY>[__<SUBKEY>]` with keys in SCREAMING_SNAKE_CASE,
 * e.g. `SLUICE_BATCHING__MAX_BATCH_SIZE=64` sets `batching.maxBatchSize`, `SLUICE_KAFKA__SASL__PASSWORD`
 * sets `kafka.sasl.password`. Only names containing `__` are config keys, so other SLUICE_* variables
 * (SLUICE_CONFIG, SLUICE_KAFKA_HOME) stay free. Values are coerced by the schema type at that key:
 * numbers, booleans (true/false/1/0/yes/no), lists (comma-separated or a JSON array), maps
 * (`k=v,k2=v2` or a JSON object). Plain `KAFKA_BROKERS` sets `kafka.brokers` unless
 * `SLUICE_KAFKA__BROKERS` is also set.
 *
 * A union with object members (`kafka.ssl`: a boolean or an object of TLS settings) takes either form:
 * its own variable (`SLUICE_KAFKA__SSL=true` or a JSON object), or one variable per key of the object
 * members (`SLUICE_KAFKA__SSL__CA_PATH=/ca.pem`). Both together merge: `true` or a JSON object plus
 * sub-keys is the object with those keys (a sub-key wins over the same key in the JSON); `false` or
 * any other value plus sub-keys is an error, since the sub-keys would silently override it.
 */
export const ENV_PREFIX = "SLUICE_";

export interface EnvOverrides {
  /** Partial config built from the environment. */
  values: Record<string, unknown>;
  /** Dotted key → the variable that set it, so errors can say where a bad value came from. */
  sources: Map<string, string>;
}

type AnySchema = z.ZodType;

interface ZodDefLike {
  type: string;
  innerType?: AnySchema;
  in?: AnySchema;
  shape?: Record<string, AnySchema>;
  options?: AnySchema[];
}

function defOf(schema: AnySchema): ZodDefLike {
  return (schema as unknown as { _zod: { def: ZodDefLike } })._zod.def;
}

/** Strips default/optional/prefault wrappers down to the schema that says what the value is. */
function unwrap(schema: AnySchema): AnySchema {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    if (def.innerType && ["default", "prefault", "optional", "nullable", "readonly"].includes(def.type)) {
      current = def.innerType;
    } else if (def.type === "pipe" && def.in) {
      current = def.in;
    } else {
      return current;
    }
  }
}

/** `maxBatchSize` → `MAX_BATCH_SIZE`. */
export function envSegment(key: string): string {
  return key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
}

/** The environment variable that overrides a dotted config key (`batching.maxBatchSize`). */
export function envNameFor(dottedKey: string): string {
  return ENV_PREFIX + dottedKey.split(".").map(envSegment).join("__");
}

/** Non-numbers stay the original text, so validation reports what the user wrote. */
function asNumber(text: string, raw: string): unknown {
  return text !== "" && Number.isFinite(Number(text)) ? Number(text) : raw;
}

function asBoolean(text: string, raw: string): unknown {
  const lower = text.toLowerCase();
  if (["true", "1", "yes", "on"].includes(lower)) return true;
  if (["false", "0", "no", "off"].includes(lower)) return false;
  return raw;
}

function coerce(raw: string, leaf: AnySchema): unknown {
  const type = defOf(leaf).type;
  const text = raw.trim();
  switch (type) {
    case "number":
      return asNumber(text, raw);
    case "boolean":
      return asBoolean(text, raw);
    case "union": {
      // By the members' types: `kafka.ssl` is true/false or a JSON object of TLS settings,
      // `model.workers` "auto" or a number.
      if (text.startsWith("{")) return parseJson(text, raw);
      const members = (defOf(leaf).options ?? []).map((option) => defOf(unwrap(option)).type);
      const asBool = members.includes("boolean") ? asBoolean(text, raw) : raw;
      if (asBool !== raw) return asBool;
      return members.includes("number") ? asNumber(text, raw) : raw;
    }
    case "array":
      if (text.startsWith("[")) return parseJson(text, raw);
      return text
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
    case "record":
      if (text.startsWith("{")) return parseJson(text, raw);
      return Object.fromEntries(
        text
          .split(",")
          .filter((pair) => pair.trim() !== "")
          .map((pair) => {
            const eq = pair.indexOf("=");
            return eq < 0 ? [pair.trim(), ""] : [pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()];
          }),
      );
    default:
      return raw;
  }
}

function parseJson(text: string, raw: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return raw;
  }
}

/**
 * The keys an environment variable may name below a schema: an object's fields, or for a union the
 * fields of its object members (`kafka.ssl`), each with its schema. Undefined: no sub-keys at all.
 */
function subKeys(schema: AnySchema): { keys: Map<string, AnySchema>; union: boolean } | undefined {
  const inner = unwrap(schema);
  const def = defOf(inner);
  if (def.shape) return { keys: new Map(Object.entries(def.shape)), union: false };
  if (def.type !== "union") return undefined;
  const keys = new Map<string, AnySchema>();
  for (const option of def.options ?? []) {
    for (const [key, child] of Object.entries(defOf(unwrap(option)).shape ?? {})) {
      if (!keys.has(key)) keys.set(key, child);
    }
  }
  return keys.size > 0 ? { keys, union: true } : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Sets `value` at `path`. Variables are applied in name order, so a union's own variable
 * (`SLUICE_KAFKA__SSL`) is set before its sub-keys: under a sub-key, its `true` becomes an object, a
 * JSON object is kept and the sub-key set in it (the sub-key wins), anything else is `conflict`.
 */
function setPath(
  target: Record<string, unknown>,
  path: string[],
  value: unknown,
  conflict: (at: string[], existing: unknown) => never,
): void {
  let node = target;
  path.slice(0, -1).forEach((key, i) => {
    const next = node[key];
    if (isPlainObject(next)) {
      node = next;
      return;
    }
    if (next !== undefined && next !== true) conflict(path.slice(0, i + 1), next);
    const created: Record<string, unknown> = {};
    node[key] = created;
    node = created;
  });
  node[path[path.length - 1]!] = value;
}

/** What the error for an unknown key lists: the keys there may be, and for a union its JSON form. */
function allowedBelow(below: ReturnType<typeof subKeys>, path: string[]): string {
  if (!below) return "(no sub-keys)";
  const keys = [...below.keys.keys()].map(envSegment).join(", ");
  if (!below.union) return keys;
  const variable = envNameFor(path.join("."));
  return `${keys} (the keys of ${path.join(".")}'s object form; ${variable} also takes that object as JSON)`;
}

/** Reads config overrides from the environment; an unknown `SLUICE_*__*` name is an error (a typo). */
export function readEnvOverrides(env: NodeJS.ProcessEnv): EnvOverrides {
  const values: Record<string, unknown> = {};
  const sources = new Map<string, string>();

  const apply = (name: string, raw: string): void => {
    const segments = name.slice(ENV_PREFIX.length).split("__");
    let schema: AnySchema = sluiceConfigSchema;
    const path: string[] = [];
    for (const segment of segments) {
      const below = subKeys(schema);
      const key = below ? [...below.keys.keys()].find((k) => envSegment(k) === segment) : undefined;
      if (!below || key === undefined) {
        const where = path.length === 0 ? "" : ` under ${path.join(".")}`;
        throw new SluiceError(
          "CONFIG_INVALID",
          `environment variable ${name}: unknown key ${segment}${where}; allowed: ${allowedBelow(below, path)}`,
          { context: { variable: name } },
        );
      }
      path.push(key);
      schema = below.keys.get(key)!;
    }
    setPath(values, path, coerce(raw, unwrap(schema)), (at, other) => {
      const key = at.join(".");
      const setter = sources.get(key) ?? `environment variable ${envNameFor(key)}`;
      throw new SluiceError(
        "CONFIG_INVALID",
        `environment variables conflict: ${setter} sets ${key} to ${JSON.stringify(other)}, and ${name} sets ${path.join(".")} inside it; unset one of them (${key}'s sub-keys imply its object form)`,
        { context: { variable: name } },
      );
    });
    sources.set(path.join("."), `environment variable ${name}`);
  };

  const brokers = env["KAFKA_BROKERS"];
  if (brokers !== undefined && brokers.trim() !== "") apply("SLUICE_KAFKA__BROKERS", brokers);
  if (brokers !== undefined && brokers.trim() !== "")
    sources.set("kafka.brokers", "environment variable KAFKA_BROKERS");

  for (const name of Object.keys(env).sort()) {
    const raw = env[name];
    if (!name.startsWith(ENV_PREFIX) || !name.includes("__") || raw === undefined) continue;
    apply(name, raw);
  }
  return { values, sources };
}
