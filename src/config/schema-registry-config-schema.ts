import { z } from "zod";
import { positiveInt } from "./config-fields.js";

/** The `schemaRegistry` section, for the avro-registry codec (docs/contracts.md, "Schema registry"). */
export const schemaRegistryBasicAuthSchema = z
  .strictObject({
    user: z.string().min(1).describe("Registry user name."),
    password: z.string().optional().describe("Registry password (masked when printed)."),
    passwordFile: z
      .string()
      .min(1)
      .optional()
      .describe("File holding the registry password (trailing newline ignored); instead of password."),
  })
  .refine((a) => (a.password === undefined) !== (a.passwordFile === undefined), {
    error: "set exactly one of password and passwordFile",
  })
  .describe("HTTP basic authentication {user, password | passwordFile}; omit for none.");

export const schemaRegistrySchema = z
  .strictObject({
    url: z
      .url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
      .optional()
      .describe(
        "Confluent-compatible registry API base URL, e.g. http://127.0.0.1:8081 or Apicurio's http://host:8080/apis/ccompat/v7; needed by the avro-registry codec.",
      ),
    basicAuth: schemaRegistryBasicAuthSchema
      .optional()
      .describe("HTTP basic authentication {user, password | passwordFile}; omit for none."),
    caPath: z
      .string()
      .min(1)
      .optional()
      .describe("PEM file of the CA that signed the registry's TLS certificate (https URLs)."),
    subjectNameStrategy: z
      .enum(["TopicNameStrategy", "RecordNameStrategy"])
      .default("TopicNameStrategy")
      .describe(
        "Subject of the result schema: TopicNameStrategy = <topic>-value, RecordNameStrategy = dev.sluice.InferenceResult.",
      ),
    requestTimeoutMs: positiveInt().default(5000).describe("Timeout of one registry HTTP request, ms."),
    retryInitialMs: positiveInt()
      .default(500)
      .describe(
        "First wait before retrying a schema lookup the registry could not answer (doubles per try), ms.",
      ),
    retryMaxMs: positiveInt()
      .default(30_000)
      .describe("Longest wait between schema lookup retries while the registry is unreachable, ms."),
  })
  .describe("Schema registry for the avro-registry codec.");
