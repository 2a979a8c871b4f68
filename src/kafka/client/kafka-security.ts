import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ConnectionOptions } from "node:tls";
import type { OauthbearerProviderResponse, SASLOptions } from "kafkajs";
import type { SluiceConfig } from "../../config/config-schema.js";
import { SluiceError } from "../../sluice-error.js";

type KafkaSettings = SluiceConfig["kafka"];
type SaslSettings = NonNullable<KafkaSettings["sasl"]>;

/** What kafkajs takes for TLS and SASL, built from `kafka.ssl` and `kafka.sasl`. */
export interface KafkaSecurityOptions {
  ssl?: boolean | ConnectionOptions;
  sasl?: SASLOptions;
}

/**
 * Turns the validated `kafka.ssl` / `kafka.sasl` settings into kafkajs options. Files (CA, client
 * certificate and key, key passphrase, SASL password) are read here, once, so a missing or unreadable
 * file is a CONFIG_INVALID naming the key, before any connection is tried. Secrets read from files
 * never appear in an error message.
 */
export function kafkaSecurityOptions(config: Pick<KafkaSettings, "ssl" | "sasl">): KafkaSecurityOptions {
  const out: KafkaSecurityOptions = {};
  const ssl = tlsOptions(config.ssl);
  if (ssl !== undefined) out.ssl = ssl;
  if (config.sasl) out.sasl = saslOptions(config.sasl);
  return out;
}

function tlsOptions(ssl: KafkaSettings["ssl"]): boolean | ConnectionOptions | undefined {
  if (ssl === false) return undefined;
  if (ssl === true) return true;
  const options: ConnectionOptions = { rejectUnauthorized: ssl.rejectUnauthorized };
  if (ssl.caPath !== undefined) options.ca = [readSetting("kafka.ssl.caPath", ssl.caPath)];
  if (ssl.certPath !== undefined) options.cert = readSetting("kafka.ssl.certPath", ssl.certPath);
  if (ssl.keyPath !== undefined) options.key = readSetting("kafka.ssl.keyPath", ssl.keyPath);
  if (ssl.keyPasswordFile !== undefined)
    options.passphrase = firstLine(readSetting("kafka.ssl.keyPasswordFile", ssl.keyPasswordFile));
  if (ssl.servername !== undefined) options.servername = ssl.servername;
  return options;
}

function saslOptions(sasl: SaslSettings): SASLOptions {
  if (sasl.mechanism === "oauthbearer")
    return { mechanism: "oauthbearer", oauthBearerProvider: tokenSource(sasl) };
  // The schema guarantees username and exactly one of password / passwordFile here.
  const username = sasl.username as string;
  const password =
    sasl.passwordFile !== undefined
      ? firstLine(readSetting("kafka.sasl.passwordFile", sasl.passwordFile))
      : (sasl.password as string);
  switch (sasl.mechanism) {
    case "plain":
      return { mechanism: "plain", username, password };
    case "scram-sha-256":
      return { mechanism: "scram-sha-256", username, password };
    case "scram-sha-512":
      return { mechanism: "scram-sha-512", username, password };
  }
}

/** Tokens are taken again this long before the `exp` they carry, ms. */
const TOKEN_EXPIRY_MARGIN_MS = 30_000;
/** Longest a token command may run, ms. */
const TOKEN_COMMAND_TIMEOUT_MS = 30_000;

/**
 * kafkajs asks the provider for a token on every (re)authentication. The token is cached until
 * shortly before its JWT `exp` claim (a token without a readable `exp` is fetched anew each time),
 * then re-read from `tokenFile` or re-run from `tokenCommand`, so a file a sidecar rotates, or a
 * command that asks an identity provider, keeps the client authenticated.
 */
function tokenSource(sasl: SaslSettings): () => Promise<OauthbearerProviderResponse> {
  let cached: { value: string; expiresAtMs: number | undefined } | undefined;
  return async () => {
    const now = Date.now();
    if (cached?.expiresAtMs !== undefined && now < cached.expiresAtMs - TOKEN_EXPIRY_MARGIN_MS)
      return { value: cached.value };
    const value =
      sasl.tokenFile !== undefined
        ? firstLine(readSetting("kafka.sasl.tokenFile", sasl.tokenFile))
        : await runTokenCommand(sasl.tokenCommand as string);
    if (value === "")
      throw new SluiceError(
        "AUTHENTICATION_FAILED",
        `the oauthbearer token from ${sasl.tokenFile !== undefined ? `kafka.sasl.tokenFile (${sasl.tokenFile})` : "kafka.sasl.tokenCommand"} is empty`,
      );
    cached = { value, expiresAtMs: jwtExpiryMs(value) };
    return { value };
  };
}

function runTokenCommand(command: string): Promise<string> {
  return new Promise((done, fail) => {
    execFile(
      "/bin/sh",
      ["-c", command],
      { timeout: TOKEN_COMMAND_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
      (error, stdout) => {
        // The command line itself may hold a client secret: never echo it, nor its output.
        if (error)
          fail(
            new SluiceError(
              "AUTHENTICATION_FAILED",
              `kafka.sasl.tokenCommand failed (${error.killed ? `timed out after ${TOKEN_COMMAND_TIMEOUT_MS} ms` : `exit code ${String(error.code)}`}); run it by hand to see why`,
            ),
          );
        else done(firstLine(stdout));
      },
    );
  });
}

/** `exp` (seconds) of a JWT as ms, or undefined when the token is not a readable JWT. */
export function jwtExpiryMs(token: string): number | undefined {
  const payload = token.split(".")[1];
  if (payload === undefined) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { exp?: unknown }).exp;
    return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

function readSetting(key: string, path: string): string {
  const file = resolve(path);
  try {
    return readFileSync(file, "utf8");
  } catch (cause) {
    const reason = (cause as NodeJS.ErrnoException).code ?? "unreadable";
    throw new SluiceError(
      "CONFIG_INVALID",
      `${key}: cannot read ${file} (${reason}); fix the path or its permissions`,
      {
        context: { key, file },
      },
    );
  }
}

/** The first line of a secret file or a command's output (editors and `echo` add a newline). */
function firstLine(text: string): string {
  return text.split(/\r?\n/)[0] ?? "";
}
