/**
 * The one error type Sluice throws on purpose. Callers dispatch on `code`, never on class names
 * (docs/design.md §6.3). `retriable` says whether trying the same thing again can succeed.
 */
export type SluiceErrorCode =
  // configuration and environment
  | "CONFIG_INVALID"
  | "DEPENDENCY_MISSING"
  | "BROKER_UNAVAILABLE"
  | "BROKER_START_FAILED"
  | "GROUP_NOT_FOUND"
  // secured Kafka (src/kafka/client/kafka-failure.ts classifies kafkajs errors into these)
  | "AUTHENTICATION_FAILED"
  | "AUTHORIZATION_FAILED"
  | "TLS_FAILED"
  // per-record / per-item failures (these become dead letters or error results)
  | "DECODE_FAILED"
  | "SCHEMA_VIOLATION"
  | "MISSING_ID"
  | "PAYLOAD_TOO_LARGE"
  | "EMPTY_TEXT"
  | "INVALID_TEXT"
  | "TOKENIZE_FAILED"
  | "INFERENCE_FAILED"
  | "DEADLINE_EXCEEDED"
  // models
  | "MODEL_NOT_FOUND"
  | "MODEL_LOAD_FAILED"
  | "MODEL_MISMATCH"
  | "MODEL_VERSION_UNAVAILABLE"
  | "MODEL_DECISION_REFUSED"
  | "MODEL_SWITCH_TIMEOUT"
  | "MODEL_FETCH_FAILED"
  // delivery
  | "PRODUCER_FENCED"
  | "TRANSACTION_FAILED"
  | "PUBLISH_FAILED"
  | "PUBLISH_TOO_LARGE"
  // schema registry (avro-registry codec): start-up and lookups; the last three are dead-letter codes
  | "REGISTRY_UNAVAILABLE"
  | "REGISTRY_START_FAILED"
  | "SCHEMA_INCOMPATIBLE"
  | "WRONG_MAGIC_BYTE"
  | "UNKNOWN_SCHEMA_ID"
  | "SCHEMA_UNRESOLVABLE"
  // batch mode
  | "MANIFEST_MISMATCH"
  | "INPUT_INVALID"
  // backfill runs
  | "RUN_NOT_FOUND"
  | "TOPIC_MISSING"
  | "INTERNAL";

export interface SluiceErrorContext {
  topic?: string;
  partition?: number;
  offset?: string;
  [key: string]: unknown;
}

export class SluiceError extends Error {
  override readonly name = "SluiceError";
  readonly code: SluiceErrorCode;
  readonly retriable: boolean;
  readonly context: SluiceErrorContext;

  constructor(
    code: SluiceErrorCode,
    message: string,
    options: { retriable?: boolean; cause?: unknown; context?: SluiceErrorContext } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.context = options.context ?? {};
  }
}

export function isSluiceError(value: unknown, code?: SluiceErrorCode): value is SluiceError {
  return value instanceof SluiceError && (code === undefined || value.code === code);
}

/**
 * Security failures (wrong credentials, a refused ACL, an untrusted certificate): retrying the same
 * request cannot succeed, so whoever meets one stops and reports it instead of retrying.
 */
export function isAccessFailure(value: unknown): value is SluiceError {
  return (
    value instanceof SluiceError &&
    (value.code === "AUTHENTICATION_FAILED" ||
      value.code === "AUTHORIZATION_FAILED" ||
      value.code === "TLS_FAILED")
  );
}
