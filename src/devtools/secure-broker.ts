import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KafkaSecuritySettings } from "../kafka/client/kafka-client.js";
import { SluiceError } from "../sluice-error.js";
import { choosePort, run } from "./broker-process.js";
import type { BrokerListeners } from "./local-broker.js";

/** What `sluice kafka start --secure` prints and tests read: where the CA is and who may log in. */
export interface SecureBrokerCredentials {
  /** PEM of the self-signed CA that signed the broker certificate (give it as kafka.ssl.caPath). */
  caPath: string;
  /** SCRAM-SHA-512 super user (creates topics, grants ACLs). */
  admin: { username: string; password: string };
  /** SCRAM-SHA-512 application user: not a super user, it can do only what ACLs grant. */
  app: { username: string; password: string };
  /** Client certificate and key (PEM) for the mutual-TLS listener; its principal is `User:CN=<cn>`. */
  client: { certPath: string; keyPath: string; principal: string };
  /** host:port of the SSL listener that requires a client certificate (mutual TLS, no SASL). */
  mtlsBootstrap: string;
}

const CLIENT_CN = "sluice-mtls-client";

/**
 * The secured listener layout of the local broker, like a production cluster:
 * - a SASL_SSL client listener with SCRAM-SHA-512 users created at storage-format time
 *   (`--add-scram`, KRaft has no other way before the broker runs);
 * - an SSL listener that requires a client certificate (mutual TLS; principal `User:CN=...`);
 * - the controller listener on SASL_PLAINTEXT with PLAIN (KRaft's controller cannot use SCRAM);
 * - a self-signed CA in `<runDir>/tls` whose broker certificate names IP:127.0.0.1 and localhost;
 * - StandardAuthorizer with allow.everyone.if.no.acl.found=false and only the admin as super user.
 * Certificates come from `openssl`, the broker's stores from `openssl pkcs12` and `keytool` (both ship
 * with any Java 17 + OpenSSL machine). Everything is created once and kept across restarts.
 */
export class SecureBrokerLayout implements BrokerListeners {
  private credentials: SecureBrokerCredentials | undefined;
  private storePassword = "";
  private mtlsPort = 0;

  constructor(private readonly runDir: string) {}

  /** The credentials, once `prepare` ran (or from an earlier start in the same run folder). */
  describe(): SecureBrokerCredentials | undefined {
    if (this.credentials) return this.credentials;
    const file = join(this.runDir, "credentials.json");
    if (!existsSync(file)) return undefined;
    return (JSON.parse(readFileSync(file, "utf8")) as { credentials: SecureBrokerCredentials }).credentials;
  }

  async prepare(_runDir: string, usedPorts: number[]): Promise<void> {
    const tls = join(this.runDir, "tls");
    mkdirSync(tls, { recursive: true });
    const file = join(this.runDir, "credentials.json");
    this.mtlsPort = await choosePort(0, usedPorts);
    const previous = existsSync(file)
      ? (JSON.parse(readFileSync(file, "utf8")) as {
          credentials: SecureBrokerCredentials;
          storePassword: string;
        })
      : undefined;
    this.storePassword = previous?.storePassword ?? secret();
    const credentials: SecureBrokerCredentials = {
      caPath: join(tls, "ca.pem"),
      admin: previous?.credentials.admin ?? { username: "admin", password: secret() },
      app: previous?.credentials.app ?? { username: "sluice-app", password: secret() },
      client: {
        certPath: join(tls, "client.pem"),
        keyPath: join(tls, "client.key"),
        principal: `User:CN=${CLIENT_CN}`,
      },
      mtlsBootstrap: `127.0.0.1:${this.mtlsPort}`,
    };
    this.credentials = credentials;
    if (!existsSync(join(tls, "broker.p12"))) await this.makeCertificates(tls);
    writeFileSync(file, `${JSON.stringify({ credentials, storePassword: this.storePassword }, null, 2)}\n`, {
      mode: 0o600,
    });
    chmodSync(file, 0o600);
  }

  properties(port: number, controllerPort: number): string[] {
    const c = this.required();
    const tls = join(this.runDir, "tls");
    const scram = (u: { username: string; password: string }) =>
      `org.apache.kafka.common.security.scram.ScramLoginModule required username="${u.username}" password="${u.password}";`;
    return [
      `listeners=SASL_SSL://127.0.0.1:${port},MTLS://127.0.0.1:${this.mtlsPort},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=SASL_SSL://127.0.0.1:${port},MTLS://127.0.0.1:${this.mtlsPort}`,
      "listener.security.protocol.map=SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:SASL_PLAINTEXT",
      "inter.broker.listener.name=SASL_SSL",
      "sasl.enabled.mechanisms=SCRAM-SHA-512",
      "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
      `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=${scram(c.admin)}`,
      // KRaft's controller cannot use SCRAM (its users live in the metadata it serves): PLAIN there.
      "sasl.mechanism.controller.protocol=PLAIN",
      "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
      `listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${c.admin.username}" password="${c.admin.password}" user_${c.admin.username}="${c.admin.password}";`,
      `ssl.keystore.location=${join(tls, "broker.p12")}`,
      "ssl.keystore.type=PKCS12",
      `ssl.keystore.password=${this.storePassword}`,
      `ssl.key.password=${this.storePassword}`,
      `ssl.truststore.location=${join(tls, "truststore.p12")}`,
      "ssl.truststore.type=PKCS12",
      `ssl.truststore.password=${this.storePassword}`,
      "listener.name.mtls.ssl.client.auth=required",
      "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
      "allow.everyone.if.no.acl.found=false",
      `super.users=User:${c.admin.username}`,
    ];
  }

  formatArgs(): string[] {
    const c = this.required();
    return [c.admin, c.app].flatMap((u) => [
      "--add-scram",
      `SCRAM-SHA-512=[name=${u.username},password=${u.password}]`,
    ]);
  }

  adminClient(): KafkaSecuritySettings {
    const c = this.required();
    return {
      ssl: { ca: [readFileSync(c.caPath, "utf8")] },
      sasl: { mechanism: "scram-sha-512", username: c.admin.username, password: c.admin.password },
    };
  }

  private required(): SecureBrokerCredentials {
    if (!this.credentials) throw new SluiceError("INTERNAL", "SecureBrokerLayout.prepare() must run first");
    return this.credentials;
  }

  private async makeCertificates(tls: string): Promise<void> {
    const pass = `pass:${this.storePassword}`;
    const f = (name: string) => join(tls, name);
    const openssl = (args: string[]) => tool("openssl", args);
    await openssl(
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "365"].concat([
        "-keyout",
        f("ca.key"),
        "-out",
        f("ca.pem"),
        "-subj",
        "/CN=Sluice local CA",
      ]),
    );
    const sign = async (name: string, cn: string, ext: string) => {
      writeFileSync(f(`${name}.ext`), `${ext}\n`);
      await openssl(
        [
          "req",
          "-newkey",
          "rsa:2048",
          "-nodes",
          "-keyout",
          f(`${name}.key`),
          "-out",
          f(`${name}.csr`),
        ].concat(["-subj", `/CN=${cn}`]),
      );
      await openssl(
        ["x509", "-req", "-sha256", "-days", "365", "-in", f(`${name}.csr`), "-CA", f("ca.pem")].concat([
          "-CAkey",
          f("ca.key"),
          "-CAcreateserial",
          "-out",
          f(`${name}.pem`),
          "-extfile",
          f(`${name}.ext`),
        ]),
      );
    };
    await sign(
      "broker",
      "localhost",
      "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
    );
    await sign("client", CLIENT_CN, "extendedKeyUsage=clientAuth");
    // Passwords never go last: a failing tool's error message names its last argument.
    await openssl(
      ["pkcs12", "-export", "-passout", pass, "-in", f("broker.pem"), "-inkey", f("broker.key")].concat([
        "-certfile",
        f("ca.pem"),
        "-name",
        "broker",
        "-out",
        f("broker.p12"),
      ]),
    );
    await tool(
      "keytool",
      ["-importcert", "-noprompt", "-storepass", this.storePassword, "-alias", "sluice-ca"].concat([
        "-keystore",
        f("truststore.p12"),
        "-storetype",
        "PKCS12",
        "-file",
        f("ca.pem"),
      ]),
    );
    for (const key of ["ca.key", "broker.key", "client.key"]) chmodSync(f(key), 0o600);
  }
}

async function tool(command: string, args: string[]): Promise<void> {
  try {
    await run(command, args, { stderr: true });
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
    throw new SluiceError(
      missing ? "DEPENDENCY_MISSING" : "BROKER_START_FAILED",
      missing
        ? `${command} is needed to make the secured broker's certificates (it comes with ${command === "keytool" ? "Java 17" : "OpenSSL"})`
        : `${command} failed making the secured broker's certificates: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** A random password without characters that need quoting in JAAS or StorageTool arguments. */
function secret(): string {
  return randomBytes(18).toString("base64url").replace(/[-_]/g, "x");
}
