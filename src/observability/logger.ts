import { hostname } from "node:os";
import { type DestinationStream, type Level, type Logger, pino } from "pino";
import { SluiceError } from "../sluice-error.js";

/**
 * Paths that may carry request payload text (docs/design.md §5.4). Redacted unless `logPayloads: true`.
 * Syntax is pino's redact syntax: `*` matches one level, `[*]` any array element. Pino cannot redact
 * a free-text message, so payload text must never be interpolated into a log message — pass it as a
 * field (where these paths catch it) or better, not at all.
 */
export const DEFAULT_PAYLOAD_REDACT_PATHS: readonly string[] = [
  "text",
  "*.text",
  "*.*.text",
  "texts",
  "*.texts",
  "request.text",
  "requests[*].text",
  "*.requests[*].text",
  "value",
  "*.value",
  "key",
  "*.key",
  "payload",
  "*.payload",
  "record.value",
  "record.key",
  "message.value",
  "message.key",
  "messages[*].value",
  "messages[*].key",
  "attributes",
  "*.attributes",
];

/**
 * Paths that carry credentials. Always redacted, `logPayloads` notwithstanding, so a debug session
 * with payload logging on still cannot leak a SASL password.
 */
export const SECRET_REDACT_PATHS: readonly string[] = [
  "password",
  "*.password",
  "*.*.password",
  "sasl",
  "*.sasl",
  "*.*.sasl",
  "sasl.*",
  "ssl.key",
  "ssl.passphrase",
  "*.ssl.key",
  "*.ssl.passphrase",
  "secret",
  "*.secret",
  "token",
  "*.token",
  "apiKey",
  "*.apiKey",
  "authorization",
  "*.authorization",
  "headers.authorization",
];

export const REDACTED = "[Redacted]";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
const LEVELS: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export interface LoggerOptions {
  /** Minimum level written. Default `"info"`. */
  level?: LogLevel;
  /** Opt-in to logging payload fields (text, record values/keys, attributes). Default `false`. */
  logPayloads?: boolean;
  /** Extra pino redact paths, always redacted (added to the defaults, never replacing secrets). Default `[]`. */
  redactPaths?: readonly string[];
  /** Where JSON lines go. Default: stdout. Tests pass a stream to capture lines. */
  destination?: DestinationStream;
  /** Fields on every line, e.g. `{ instanceId }`. Default: none besides pid/hostname. */
  base?: Record<string, unknown>;
}

/** The paths a logger with these options redacts (exposed so tests and `config print` can show them). */
export function effectiveRedactPaths(opts: Pick<LoggerOptions, "logPayloads" | "redactPaths">): string[] {
  const paths = new Set<string>(SECRET_REDACT_PATHS);
  if (!opts.logPayloads) for (const p of DEFAULT_PAYLOAD_REDACT_PATHS) paths.add(p);
  for (const p of opts.redactPaths ?? []) paths.add(p);
  return [...paths];
}

/**
 * Root pino logger for the process. Components take `logger.child({ component: "consumer-loop" })`.
 * Lines are JSON with an ISO `time`, numeric `level` and the component name.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? "info";
  if (!LEVELS.includes(level)) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `Unknown log level "${String(level)}"; use one of ${LEVELS.join(", ")}`,
      {
        context: { option: "observability.logLevel" },
      },
    );
  }
  const paths = effectiveRedactPaths(opts);
  try {
    return pino(
      {
        level: level as Level | "silent",
        // pid and hostname on every line (pino's own default base), so lines from several hosts tell apart.
        base: { pid: process.pid, hostname: hostname(), ...(opts.base ?? {}) },
        timestamp: pino.stdTimeFunctions.isoTime,
        redact: { paths, censor: REDACTED },
      },
      opts.destination ?? pino.destination(1),
    );
  } catch (cause) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `Invalid log redaction path in observability.redactPaths (${(cause as Error).message}); use pino redact syntax such as "a.b", "*.text" or "items[*].text"`,
      { cause, context: { option: "observability.redactPaths" } },
    );
  }
}

/**
 * A child of `logger` for lines whose every field Sluice builds itself from counts, timings, topic
 * names and hashed ids (the request log, `BatchLog`): no payload or secret can be in them, so the
 * default payload and secret paths are not walked on every line (pino's redaction copies the part
 * of each line its wildcard paths reach). The user's own paths (`observability.redactPaths`) still
 * apply.
 */
export function ownFieldsChild(
  logger: Logger,
  bindings: Record<string, unknown>,
  redactPaths: readonly string[] = [],
): Logger {
  return logger.child(bindings, { redact: { paths: [...redactPaths], censor: REDACTED } });
}

export type { Logger } from "pino";
