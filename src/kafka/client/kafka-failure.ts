import type { Kafka, LogEntry } from "kafkajs";
import { SluiceError } from "../../sluice-error.js";

/**
 * The one home of "what went wrong talking to Kafka": kafkajs errors (possibly wrapped in retry and
 * aggregate errors) become AUTHENTICATION_FAILED, AUTHORIZATION_FAILED, TLS_FAILED or
 * BROKER_UNAVAILABLE, each naming what was refused or tried and what to set. The first three are
 * permanent (retrying the same request cannot succeed; `isAccessFailure` in sluice-error.ts), so
 * callers stop instead of retrying. Every adapter in src/kafka (and the CLI's last-resort report)
 * classifies through here; new commands (backfill) get the same behaviour by calling
 * `kafkaFailure(error, {...})` with the accesses they need.
 */

/** Kafka ACL resource types Sluice needs. */
export type KafkaResourceType = "TOPIC" | "GROUP" | "TRANSACTIONAL_ID" | "CLUSTER";
/** Kafka ACL operations Sluice needs. */
export type KafkaOperation = "READ" | "WRITE" | "DESCRIBE" | "CREATE";

/** One access the failed call needed: `names` are literal names, or prefixes when `prefixed`. */
export interface KafkaAccess {
  operation: KafkaOperation;
  resourceType: KafkaResourceType;
  names: readonly string[];
  prefixed?: boolean;
}

export interface FailureContext {
  /** What Sluice was doing, e.g. "publishing results of t[0]". */
  doing: string;
  /** The accesses the call needed; an authorization failure names those of the refused resource type. */
  access?: readonly KafkaAccess[];
  /** The client that failed (its settings and recent broker denials sharpen the message). */
  kafka?: Kafka;
}

/** What the classifier knows about a client built by `createKafka`. */
interface ClientFacts {
  brokers: readonly string[];
  ssl: boolean;
  sasl?: { mechanism: string; username?: string };
  /** Authorization errors the broker answered recently (kafkajs logs them and may drop the cause). */
  denials: { type: KafkaResourceType; atMs: number }[];
}

const clients = new WeakMap<Kafka, ClientFacts>();
/** A denial the broker sent this long ago still explains a later "coordinator not found", ms. */
const DENIAL_MEMORY_MS = 120_000;

/**
 * `createKafka` taps each client's kafkajs log through this and attaches the client once built. Log
 * entries carry the only trace of some denials: kafkajs answers a FindCoordinator refused with
 * GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED by "Failed to find group coordinator" without a cause.
 */
export function denialLogTap(): {
  tap: (entry: LogEntry) => void;
  attach: (kafka: Kafka, facts: Omit<ClientFacts, "denials">) => void;
} {
  const pending: ClientFacts["denials"] = [];
  let facts: ClientFacts | undefined;
  return {
    tap: (entry) => {
      if (facts) noteDenial(facts, entry);
      else {
        const type = denialType(String(entry.log["error"] ?? ""));
        if (type) pending.push({ type, atMs: Date.now() });
      }
    },
    attach: (kafka, f) => {
      facts = { ...f, denials: pending };
      clients.set(kafka, facts);
    },
  };
}

function noteDenial(facts: ClientFacts, entry: LogEntry): void {
  const type = denialType(String(entry.log["error"] ?? ""));
  if (!type) return;
  facts.denials.push({ type, atMs: Date.now() });
  if (facts.denials.length > 16) facts.denials.splice(0, facts.denials.length - 16);
}

function denialType(text: string): KafkaResourceType | undefined {
  if (/group authorization failed/i.test(text)) return "GROUP";
  if (/transactional id authorization failed/i.test(text)) return "TRANSACTIONAL_ID";
  if (/topic authorization failed/i.test(text)) return "TOPIC";
  if (/cluster authorization failed/i.test(text)) return "CLUSTER";
  return undefined;
}

const AUTHORIZATION_TYPES: Record<string, KafkaResourceType> = {
  TOPIC_AUTHORIZATION_FAILED: "TOPIC",
  GROUP_AUTHORIZATION_FAILED: "GROUP",
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID",
  CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
};

/** Node's TLS verification codes, and what to set for each. */
const TLS_UNTRUSTED = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
  "CERT_UNTRUSTED",
]);
const TLS_UNTRUSTED_TEXT =
  /self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate|certificate chain/i;
const TLS_HOSTNAME_TEXT = /does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/i;
const TLS_EXPIRED_TEXT = /certificate has expired|certificate is not yet valid/i;
const TLS_PROTOCOL_TEXT =
  /wrong version number|packet length too long|unknown protocol|ssl3_get_record|tlsv1 alert|handshake failure|certificate required|bad certificate|unknown ca/i;
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "ECONNRESET",
]);
const UNREACHABLE_TEXT =
  /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|Connection timeout|Connection error|Closed connection|KafkaJSBrokerNotFound|broker not found|Request timed out/i;

/**
 * Classifies `error` if it is a security or connectivity failure; returns undefined otherwise (the
 * caller keeps its own classification, e.g. PRODUCER_FENCED). A SluiceError of those classes is
 * returned as it is.
 */
export function kafkaFailure(error: unknown, context: FailureContext): SluiceError | undefined {
  if (error instanceof SluiceError) {
    return ["AUTHENTICATION_FAILED", "AUTHORIZATION_FAILED", "TLS_FAILED", "BROKER_UNAVAILABLE"].includes(
      error.code,
    )
      ? error
      : undefined;
  }
  const chain = errorChain(error);
  const facts = context.kafka ? clients.get(context.kafka) : undefined;
  const text = chain.map((e) => (e instanceof Error ? `${e.name} ${e.message}` : String(e))).join(" | ");
  const types = chain.map((e) => String((e as { type?: unknown }).type ?? ""));
  const codes = chain.map((e) => String((e as { code?: unknown }).code ?? ""));

  const authType = types.map((t) => AUTHORIZATION_TYPES[t]).find((t) => t !== undefined);
  const recentDenial = facts?.denials.filter((d) => Date.now() - d.atMs < DENIAL_MEMORY_MS).at(-1)?.type;
  const coordinatorLost = /failed to find (group|transaction) coordinator/i.test(text);
  const refused = authType ?? denialType(text) ?? (coordinatorLost ? recentDenial : undefined);
  if (refused) return authorizationFailed(refused, error, context, facts);

  if (
    chain.some((e) => (e as Error)?.name === "KafkaJSSASLAuthenticationError") ||
    types.includes("SASL_AUTHENTICATION_FAILED") ||
    /SASL .*authentication failed|Authentication failed during authentication/i.test(text)
  ) {
    const who = facts?.sasl
      ? `user "${facts.sasl.username ?? "(token)"}" with ${facts.sasl.mechanism.toUpperCase()}`
      : "this client";
    const fix =
      facts?.sasl?.mechanism === "oauthbearer"
        ? "check the token kafka.sasl.tokenFile or kafka.sasl.tokenCommand gives"
        : "check kafka.sasl.username and kafka.sasl.password (or passwordFile), and kafka.sasl.mechanism matches the broker's";
    return new SluiceError(
      "AUTHENTICATION_FAILED",
      `Kafka refused the login of ${who} while ${context.doing}; ${fix}`,
      { cause: error, context: { brokers: facts?.brokers } },
    );
  }

  const tls = tlsReason(text, codes);
  if (tls) {
    return new SluiceError(
      "TLS_FAILED",
      `TLS to ${brokerList(facts)} failed while ${context.doing}: ${tls.reason}; ${tls.fix}`,
      { cause: error, context: { brokers: facts?.brokers } },
    );
  }

  if (codes.some((c) => UNREACHABLE_CODES.has(c)) || UNREACHABLE_TEXT.test(text)) {
    const closed = /Closed connection/i.test(text) && facts && !facts.ssl;
    const hint = closed
      ? "; the broker closed the connection: if its listener uses TLS set kafka.ssl (true or {caPath: ...}), if it uses SASL set kafka.sasl"
      : "";
    const reason = codes.find((c) => UNREACHABLE_CODES.has(c)) ?? firstLine(chain);
    return new SluiceError(
      "BROKER_UNAVAILABLE",
      `cannot reach Kafka at ${brokerList(facts)} while ${context.doing} (${reason})${hint}; check kafka.brokers (or KAFKA_BROKERS) and that the broker runs`,
      { retriable: true, cause: error, context: { brokers: facts?.brokers } },
    );
  }
  return undefined;
}

/**
 * A TOPIC denial of a request that wrote several topics does not say which one was refused (kafkajs
 * keeps only the error code). A principal with no ACL on a topic cannot DESCRIBE it either, so the
 * topics whose metadata is refused are named; when all are describable, the message keeps them all.
 */
export async function narrowTopicDenial(failure: SluiceError, kafka: Kafka): Promise<SluiceError> {
  const names = String(failure.context["resourceName"] ?? "")
    .split(",")
    .filter((n) => n !== "");
  if (
    failure.code !== "AUTHORIZATION_FAILED" ||
    failure.context["resourceType"] !== "TOPIC" ||
    names.length < 2
  )
    return failure;
  const refused: string[] = [];
  const admin = kafka.admin();
  try {
    await admin.connect();
    for (const topic of names) {
      try {
        await admin.fetchTopicMetadata({ topics: [topic] });
      } catch (error) {
        if (errorChain(error).some((e) => (e as { type?: unknown }).type === "TOPIC_AUTHORIZATION_FAILED"))
          refused.push(topic);
      }
    }
  } catch {
    return failure;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  if (refused.length === 0 || refused.length === names.length) return failure;
  const operation = String(failure.context["operation"] ?? "WRITE");
  return new SluiceError(
    "AUTHORIZATION_FAILED",
    failure.message
      .replace(names.map((n) => `"${n}"`).join(", "), refused.map((n) => `"${n}"`).join(", "))
      .replace(" (one of these is missing)", ""),
    { cause: failure.cause, context: { ...failure.context, operation, resourceName: refused.join(",") } },
  );
}

function authorizationFailed(
  type: KafkaResourceType,
  error: unknown,
  context: FailureContext,
  facts: ClientFacts | undefined,
): SluiceError {
  // add-partitions-errors.ts attaches the refused topics of a transaction: name only those.
  const refusedTopics = errorChain(error)
    .map((e) => (e as { refusedTopics?: unknown }).refusedTopics)
    .find((t): t is string[] => Array.isArray(t));
  const needed = (context.access ?? [])
    .filter((a) => a.resourceType === type)
    .map((a) =>
      type === "TOPIC" && refusedTopics && a.names.some((n) => refusedTopics.includes(n))
        ? { ...a, names: a.names.filter((n) => refusedTopics.includes(n)) }
        : a,
    );
  const who = facts?.sasl?.username ? ` to user "${facts.sasl.username}"` : "";
  const what =
    needed.length > 0
      ? needed
          .map(
            (a) =>
              `${a.operation} on ${a.resourceType}${a.prefixed ? " prefix" : ""} ${a.names.map((n) => `"${n}"`).join(", ")}`,
          )
          .join(" or ")
      : `access to a ${type}`;
  const first = needed[0];
  return new SluiceError(
    "AUTHORIZATION_FAILED",
    `Kafka denied ${what}${who} while ${context.doing}${needed.length > 1 || (first && first.names.length > 1) ? " (one of these is missing)" : ""}; grant it (\`sluice acls\` prints every ACL this configuration needs)`,
    {
      cause: error,
      context: {
        resourceType: type,
        ...(first ? { operation: first.operation, resourceName: first.names.join(",") } : {}),
        ...(first?.prefixed ? { patternType: "PREFIXED" } : {}),
      },
    },
  );
}

function tlsReason(text: string, codes: string[]): { reason: string; fix: string } | undefined {
  if (codes.includes("ERR_TLS_CERT_ALTNAME_INVALID") || TLS_HOSTNAME_TEXT.test(text))
    return {
      reason: "the broker certificate is not issued for the host name connected to",
      fix: "connect by a name in its certificate, or set kafka.ssl.servername to one",
    };
  if (codes.some((c) => TLS_UNTRUSTED.has(c)) || TLS_UNTRUSTED_TEXT.test(text))
    return {
      reason: "the broker certificate is not signed by a trusted CA",
      fix: "set kafka.ssl.caPath to the PEM file of the CA that signed it",
    };
  if (codes.includes("CERT_HAS_EXPIRED") || TLS_EXPIRED_TEXT.test(text))
    return {
      reason: "the broker certificate is expired or not yet valid",
      fix: "renew the broker certificate",
    };
  if (TLS_PROTOCOL_TEXT.test(text))
    return {
      reason: /certificate required|bad certificate|unknown ca/i.test(text)
        ? "the broker refused the client certificate"
        : "the TLS handshake failed (is this a TLS listener?)",
      fix: /certificate required|bad certificate|unknown ca/i.test(text)
        ? "set kafka.ssl.certPath and kafka.ssl.keyPath to a client certificate the broker trusts"
        : "use the broker's TLS listener, or kafka.ssl: false for a plaintext one",
    };
  return undefined;
}

function brokerList(facts: ClientFacts | undefined): string {
  return facts ? facts.brokers.join(", ") : "the configured brokers";
}

function firstLine(chain: unknown[]): string {
  const last = chain.at(-1);
  return (last instanceof Error ? last.message : String(last)).split("\n")[0] ?? "";
}

/** The error, its `originalError`/`cause` chain and aggregate members (kafkajs wraps retries). */
export function errorChain(error: unknown): unknown[] {
  const out: unknown[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 8; depth++) {
    out.push(current);
    const c = current as { originalError?: unknown; cause?: unknown; errors?: unknown };
    // KafkaJSAggregateError (one error per broker request) keeps its causes in `errors`.
    if (Array.isArray(c.errors)) out.push(...c.errors.slice(0, 8));
    current = c.originalError ?? c.cause;
  }
  return out;
}

/** "This server does not host this topic-partition": a topic that is missing, or a leader moving. */
export function mayBeMissingTopic(error: unknown): boolean {
  return errorChain(error).some(
    (e) =>
      (e as { type?: unknown }).type === "UNKNOWN_TOPIC_OR_PARTITION" ||
      /does not host this topic-partition/i.test(String((e as { message?: unknown }).message ?? "")),
  );
}
