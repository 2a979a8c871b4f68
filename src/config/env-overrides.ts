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

function coerce(raw: string, leaf: AnySchema): unknown {
  const type = defOf(leaf).type;
  const text = raw.trim();
  switch (type) {
    case "number":
      // Leave non-numbers as strings so validation reports the original text.
      return text !== "" && Number.isFinite(Number(text)) ? Number(text) : raw;
    case "boolean": {
      const lower = text.toLowerCase();
      if (["true", "1", "yes", "on"].includes(lower)) return true;
      if (["false", "0", "no", "off"].includes(lower)) return false;
      return raw;
    }
    case "array":
      if (text.startsWith("[")) return parseJson(text, raw);
      return text
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
    case "union": {
      // `kafka.ssl`: true/false, or a JSON object of TLS settings.
      if (text.startsWith("{")) return parseJson(text, raw);
      const lower = text.toLowerCase();
      if (["true", "1", "yes", "on"].includes(lower)) return true;
      if (["false", "0", "no", "off"].includes(lower)) return false;
      return raw;
    }
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

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next === "object" && next !== null && !Array.isArray(next)) {
      node = next as Record<string, unknown>;
    } else {
      const created: Record<string, unknown> = {};
      node[key] = created;
      node = created;
    }
  }
  node[path[path.length - 1]!] = value;
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
      const shape = defOf(unwrap(schema)).shape;
      const key = shape ? Object.keys(shape).find((k) => envSegment(k) === segment) : undefined;
      if (!shape || key === undefined) {
        const where = path.length === 0 ? "" : ` under ${path.join(".")}`;
        const allowed = shape ? Object.keys(shape).map(envSegment).join(", ") : "(no sub-keys)";
        throw new SluiceError(
          "CONFIG_INVALID",
          `environment variable ${name}: unknown key ${segment}${where}; allowed: ${allowed}`,
          { context: { variable: name } },
        );
      }
      path.push(key);
      schema = shape[key]!;
    }
    setPath(values, path, coerce(raw, unwrap(schema)));
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
