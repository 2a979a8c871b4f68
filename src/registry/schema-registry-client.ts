import { readFileSync } from "node:fs";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { COMPATIBILITY, SchemaRegistry } from "@kafkajs/confluent-schema-registry";
import type { Schema } from "avsc";
import type { SluiceConfig } from "../config/config-schema.js";
import { loadSchema } from "../contracts/avro-schemas.js";
import type { WriterSchemaLookup } from "../contracts/request-writer-schemas.js";
import { SluiceError } from "../sluice-error.js";

export type SchemaRegistrySettings = SluiceConfig["schemaRegistry"];

type RegistryArgs = ConstructorParameters<typeof SchemaRegistry>[0];
type Middleware = NonNullable<RegistryArgs["middlewares"]>[number];

/** What the client library throws for an HTTP answer (mappersmith's response wrapped by its error middleware). */
interface RegistryResponseError {
  status?: number;
  message?: string;
}

/** The full name the result schema is registered under by RecordNameStrategy. */
const RESULT_RECORD_NAME = "dev.sluice.InferenceResult";

/**
 * Sluice's one door to a Confluent-compatible schema registry (Confluent, Apicurio's `/apis/ccompat/v7`,
 * Karapace), through the maintained client `@kafkajs/confluent-schema-registry`: TLS with a custom
 * CA, basic auth (password or password file), per-request timeout, and errors classified into what
 * Sluice does about them. Secrets never reach an error message: messages name the URL and the cause.
 *
 * Retries are Sluice's (the client's own retry is off): a record-time lookup the registry cannot
 * answer is retried by the caller with backoff (src/processor/writer-schema-gate.ts), a start-up
 * failure is reported at once.
 */
export class SchemaRegistryClient {
  readonly url: string;
  private readonly registry: SchemaRegistry;

  private constructor(url: string, registry: SchemaRegistry) {
    this.url = url;
    this.registry = registry;
  }

  /** Reads the password file and CA now, so a bad path is a start-up error naming the key. */
  static create(settings: SchemaRegistrySettings): SchemaRegistryClient {
    const url = settings.url;
    if (url === undefined) {
      throw new SluiceError(
        "CONFIG_INVALID",
        "schemaRegistry.url is not set; the avro-registry codec needs it",
      );
    }
    const args: RegistryArgs = {
      host: url.replace(/\/+$/, ""),
      clientId: "sluice",
      retry: { retries: 0 },
      middlewares: [timeoutMiddleware(settings.requestTimeoutMs)],
    };
    const auth = settings.basicAuth;
    if (auth) {
      const password =
        auth.password ?? readSecretFile(auth.passwordFile as string, "schemaRegistry.basicAuth.passwordFile");
      args.auth = { username: auth.user, password };
    }
    if (settings.caPath !== undefined) {
      if (!url.startsWith("https:")) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `schemaRegistry.caPath is set but schemaRegistry.url ${url} is not https; use an https:// URL or drop caPath`,
        );
      }
      args.agent = new HttpsAgent({
        keepAlive: true,
        ca: readSecretFile(settings.caPath, "schemaRegistry.caPath"),
      });
    } else {
      args.agent = url.startsWith("https:")
        ? new HttpsAgent({ keepAlive: true })
        : new HttpAgent({ keepAlive: true });
    }
    return new SchemaRegistryClient(url, new SchemaRegistry(args));
  }

  /** Subject of the result schema for `topic` under the configured strategy. */
  static resultSubject(topic: string, strategy: SchemaRegistrySettings["subjectNameStrategy"]): string {
    return strategy === "RecordNameStrategy" ? RESULT_RECORD_NAME : `${topic}-value`;
  }

  /**
   * Start-up check that the registry answers and accepts our credentials: asks for a subject that
   * does not exist and expects "not found". Throws REGISTRY_UNAVAILABLE naming the URL and the cause.
   */
  async probe(): Promise<void> {
    try {
      await this.registry.getLatestSchemaId("sluice-connectivity-probe-value");
    } catch (error) {
      if (statusOf(error) === 404) return;
      throw this.unavailable("is not usable", error);
    }
  }

  /** The writer schema of a registry id: `{found}`, `{notFound}` (404), or throws REGISTRY_UNAVAILABLE (retriable). */
  async writerSchema(schemaId: number): Promise<WriterSchemaLookup> {
    try {
      const type = (await this.registry.getSchema(schemaId)) as { schema?: (opts?: object) => Schema };
      if (typeof type.schema !== "function") return { notAvro: "JSON Schema or Protobuf" };
      return { found: type.schema({ exportAttrs: true }) };
    } catch (error) {
      if (statusOf(error) === 404) return { notFound: "the registry answered 404" };
      throw this.unavailable(`could not be asked for schema id ${schemaId}`, error);
    }
  }

  /**
   * Registers schemas/inference-result.avsc (read from the file, so schema changes flow through)
   * under `subject` with BACKWARD compatibility and returns its id. Registering the same schema again
   * returns the same id. A registered subject the schema is not BACKWARD compatible with, or one set
   * to another compatibility level, fails with SCHEMA_INCOMPATIBLE.
   */
  async registerResultSchema(subject: string): Promise<number> {
    const schema = loadSchema("inference-result") as { type: "record"; name: string; fields: unknown[] };
    try {
      const { id } = await this.registry.register(schema, {
        subject,
        compatibility: COMPATIBILITY.BACKWARD,
      });
      return id;
    } catch (error) {
      const status = statusOf(error);
      const reason = messageOf(error);
      if (status === 409 || /compatib/i.test(reason)) {
        throw new SluiceError(
          "SCHEMA_INCOMPATIBLE",
          `the result schema (schemas/inference-result.avsc) is not BACKWARD compatible with subject ${subject} at ${this.url}: ${reason}; evolve the subject compatibly, set its compatibility to BACKWARD, or publish to a new topic`,
          { cause: error, context: { subject } },
        );
      }
      throw this.unavailable(`could not register the result schema under subject ${subject}`, error);
    }
  }

  private unavailable(what: string, error: unknown): SluiceError {
    const status = statusOf(error);
    let hint = "check schemaRegistry.url and that the registry runs";
    if (status === 401 || status === 403) hint = "check schemaRegistry.basicAuth (user and password)";
    else if (/certificate|self[- ]signed|SSL|TLS|CERT_/i.test(messageOf(error)))
      hint = "check schemaRegistry.caPath";
    return new SluiceError(
      "REGISTRY_UNAVAILABLE",
      `schema registry ${this.url} ${what}: ${describeCause(error)}; ${hint}`,
      { cause: error, retriable: status !== 401 && status !== 403, context: { url: this.url, status } },
    );
  }
}

function timeoutMiddleware(timeoutMs: number): Middleware {
  return () =>
    ({
      prepareRequest: (next: () => Promise<{ enhance(extras: { timeout: number }): unknown }>) =>
        next().then((request) => request.enhance({ timeout: timeoutMs })),
    }) as unknown as ReturnType<Middleware>;
}

function statusOf(error: unknown): number | undefined {
  const status = (error as RegistryResponseError | undefined)?.status;
  // mappersmith reports a transport failure (refused, reset, TLS, timeout) as status 400 with the
  // socket error as message; a registry's own 4xx/5xx carries its JSON message.
  if (status === 400 && isTransportMessage(messageOf(error))) return undefined;
  return typeof status === "number" ? status : undefined;
}

function isTransportMessage(message: string): boolean {
  return /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ETIMEDOUT|socket hang up|Timeout \(|certificate|self[- ]signed|SSL|TLS|CERT_/i.test(
    message,
  );
}

function messageOf(error: unknown): string {
  const raw =
    error instanceof Error ? error.message : String((error as RegistryResponseError)?.message ?? error);
  // The client prefixes its client id; drop it.
  return raw.replace(/^[^ ]* - /, "").replace(/^Error, status \d+: /, "");
}

function describeCause(error: unknown): string {
  const status = statusOf(error);
  const message = messageOf(error).slice(0, 300);
  return status === undefined ? message : `HTTP ${status} ${message}`;
}

function readSecretFile(path: string, key: string): string {
  try {
    return readFileSync(path, "utf8").replace(/\r?\n$/, "");
  } catch (error) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `${key} ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"}); fix the path`,
      { cause: error },
    );
  }
}
