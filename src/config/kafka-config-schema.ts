import { z } from "zod";
import { positiveInt } from "./config-fields.js";

/** The `kafka` section: brokers, client timeouts, TLS and SASL (docs/security.md). */
export const kafkaSaslSchema = z
  .strictObject({
    mechanism: z.enum(["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"]).describe("SASL mechanism."),
    username: z.string().min(1).optional().describe("SASL user name (plain, scram-*)."),
    password: z.string().optional().describe("SASL password (masked when printed); or passwordFile."),
    passwordFile: z
      .string()
      .min(1)
      .optional()
      .describe("File holding the SASL password (trailing newline ignored); instead of password."),
    tokenFile: z
      .string()
      .min(1)
      .optional()
      .describe("oauthbearer: file holding the bearer token, re-read when the token expires."),
    tokenCommand: z
      .string()
      .min(1)
      .optional()
      .describe("oauthbearer: shell command printing the bearer token, re-run when it expires (masked)."),
  })
  .superRefine((s, ctx) => {
    // One home for which SASL keys go together; each message names what to set.
    const issue = (key: string, message: string) =>
      ctx.addIssue({ code: "custom", path: [key], input: undefined, message });
    if (s.mechanism === "oauthbearer") {
      if ((s.tokenFile === undefined) === (s.tokenCommand === undefined))
        issue(
          "tokenFile",
          "oauthbearer needs exactly one of kafka.sasl.tokenFile or kafka.sasl.tokenCommand",
        );
      for (const key of ["username", "password", "passwordFile"] as const)
        if (s[key] !== undefined) issue(key, "is not used by oauthbearer (set tokenFile or tokenCommand)");
      return;
    }
    if (s.username === undefined) issue("username", `${s.mechanism} needs kafka.sasl.username`);
    if ((s.password === undefined) === (s.passwordFile === undefined))
      issue("password", `${s.mechanism} needs exactly one of kafka.sasl.password or kafka.sasl.passwordFile`);
    for (const key of ["tokenFile", "tokenCommand"] as const)
      if (s[key] !== undefined) issue(key, "is only for mechanism oauthbearer");
  })
  .describe("SASL authentication; omit for none.");

export const kafkaSslSchema = z
  .strictObject({
    caPath: z
      .string()
      .min(1)
      .optional()
      .describe("PEM file of the CA(s) that signed the brokers' certificates; unset = Node's default CAs."),
    certPath: z.string().min(1).optional().describe("PEM client certificate for mutual TLS (with keyPath)."),
    keyPath: z.string().min(1).optional().describe("PEM private key of the client certificate."),
    keyPasswordFile: z
      .string()
      .min(1)
      .optional()
      .describe("File holding the passphrase of an encrypted keyPath."),
    servername: z
      .string()
      .min(1)
      .optional()
      .describe("Host name expected in the broker certificate (SNI); unset = the broker host."),
    rejectUnauthorized: z
      .boolean()
      .default(true)
      .describe("Refuse brokers whose certificate is not trusted; false only for experiments."),
  })
  .superRefine((s, ctx) => {
    if ((s.certPath === undefined) !== (s.keyPath === undefined))
      ctx.addIssue({
        code: "custom",
        path: [s.certPath === undefined ? "certPath" : "keyPath"],
        input: undefined,
        message: "mutual TLS needs both kafka.ssl.certPath and kafka.ssl.keyPath",
      });
    if (s.keyPasswordFile !== undefined && s.keyPath === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["keyPasswordFile"],
        input: undefined,
        message: "needs kafka.ssl.keyPath (the key it unlocks)",
      });
  })
  .describe("TLS settings.");

export const kafkaSchema = z
  .strictObject({
    brokers: z
      .array(z.string().regex(/^[^\s:]+:\d{1,5}$/, "each broker must be host:port"))
      .min(1)
      .default(["127.0.0.1:19092"])
      .describe("Bootstrap brokers, host:port. Plain KAFKA_BROKERS (comma-separated) also sets this."),
    clientId: z.string().min(1).default("sluice").describe("Kafka client id prefix."),
    ssl: z
      .union([z.boolean(), kafkaSslSchema])
      .default(false)
      .describe(
        "TLS to the brokers: true (Node's default CAs), or {caPath, certPath, keyPath, keyPasswordFile, servername, rejectUnauthorized}.",
      ),
    sasl: kafkaSaslSchema
      .optional()
      .describe(
        "SASL authentication {mechanism, username, password | passwordFile} or {mechanism: oauthbearer, tokenFile | tokenCommand}; omit for none.",
      ),
    connectionTimeoutMs: positiveInt().default(3000).describe("TCP connect timeout, ms."),
    requestTimeoutMs: positiveInt().default(30_000).describe("Kafka request timeout, ms."),
  })
  .describe("How to reach Kafka.");
