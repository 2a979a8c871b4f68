import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { request as httpsRequest } from "node:https";
import { join, resolve } from "node:path";
import { packageRoot } from "../config/project-paths.js";
import { SluiceError } from "../sluice-error.js";
import { choosePort, isRunningWith, run, sleep, spawnDetached } from "./broker-process.js";
import { stopService } from "./jvm-service.js";

/**
 * A local Apicurio Registry (Confluent-compatible API at `/apis/ccompat/v7`) for development and
 * tests of the avro-registry codec, run like the local broker: Java and Maven, no Docker. The
 * `io.apicurio:apicurio-registry-app:<version>:tar.gz:all` distribution is fetched from Maven
 * Central once into a cache folder (never committed) and unpacked there; it runs on Java 17 with its
 * embedded H2 storage, by default kept in a file in the run folder (`REGISTRY_DATASOURCE_URL`), so
 * schemas and their ids survive a stop and start like a production registry's would. State, logs and
 * data live in one run folder; it only ever signals the pid it recorded there, after checking that
 * pid is still this registry.
 */
export interface LocalRegistryOptions {
  /** Run folder for state and logs. Default `<package>/.sluice/registry` (git-ignored). */
  runDir?: string;
  /** Apicurio Registry version. Default "2.6.13.Final" (3.x needs Java 21). */
  version?: string;
  /** Preferred port on 127.0.0.1. Default 18081; when taken a free port is chosen. 0 = any free port. */
  port?: number;
  /** Max JVM heap, MiB. Default 384. */
  heapMb?: number;
  /** Where the distribution is fetched and unpacked. Default `<package>/.sluice/cache`. */
  cacheDir?: string;
  /** How long `start` waits for the API to answer, ms. Default 90000. */
  startTimeoutMs?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL, ms. Default 15000. */
  stopTimeoutMs?: number;
  /**
   * Serve HTTPS only, with this PEM certificate and key (`url` is then `https://`); `caPath` is the
   * CA that signed it (used to wait for the API). Default: plain HTTP.
   */
  tls?: { certPath: string; keyPath: string; caPath: string };
  /** `file`: H2 database in `<runDir>/data` (kept across restarts); `memory`: gone at stop. Default file. */
  storage?: "file" | "memory";
  /** Java executable. Default `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java`. */
  javaCommand?: string;
  /** Maven executable. Default `mvn`. */
  mvnCommand?: string;
  onProgress?: (message: string) => void;
}

export interface LocalRegistryStatus {
  running: boolean;
  runDir: string;
  pid?: number;
  port?: number;
  /** The Confluent-compatible API base URL: what `schemaRegistry.url` is set to. */
  url?: string;
  version?: string;
  startedAt?: string;
  alreadyRunning?: boolean;
  stale?: boolean;
}

interface RegistryState {
  pid: number;
  port: number;
  tls?: boolean;
  version: string;
  startedAt: string;
  jar: string;
}

const STATE_FILE = "registry.json";
const API_PATH = "/apis/ccompat/v7";

export const REGISTRY_TOOLS_HELP =
  "install Java 17+ and Maven (e.g. `apt-get install openjdk-17-jre-headless maven`), or point Sluice at an existing registry with schemaRegistry.url";

export class LocalRegistry {
  readonly runDir: string;
  readonly version: string;
  private readonly port: number;
  private readonly heapMb: number;
  private readonly cacheDir: string;
  private readonly startTimeoutMs: number;
  private readonly stopTimeoutMs: number;
  private readonly javaCommand: string;
  private readonly mvnCommand: string;
  private readonly tls: LocalRegistryOptions["tls"];
  private readonly storage: "file" | "memory";
  private readonly progress: (message: string) => void;

  constructor(options: LocalRegistryOptions = {}) {
    this.runDir = resolve(options.runDir ?? join(packageRoot(), ".sluice", "registry"));
    this.version = options.version ?? "2.6.13.Final";
    this.port = options.port ?? 18081;
    this.heapMb = options.heapMb ?? 384;
    this.cacheDir = resolve(options.cacheDir ?? join(packageRoot(), ".sluice", "cache"));
    this.startTimeoutMs = options.startTimeoutMs ?? 90_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 15_000;
    this.javaCommand =
      options.javaCommand ??
      (process.env["JAVA_HOME"] ? join(process.env["JAVA_HOME"], "bin", "java") : "java");
    this.mvnCommand = options.mvnCommand ?? "mvn";
    this.tls = options.tls;
    this.storage = options.storage ?? "file";
    this.progress = options.onProgress ?? (() => {});
    if (!/^\d+\.\d+\.\d+(\.[A-Za-z0-9]+)?$/.test(this.version)) {
      throw new SluiceError("CONFIG_INVALID", `registry version "${this.version}" is not like 2.6.13.Final`);
    }
    if (!Number.isInteger(this.port) || this.port < 0 || this.port > 65_535) {
      throw new SluiceError("CONFIG_INVALID", `registry port ${this.port} must be an integer 0..65535`);
    }
  }

  async status(): Promise<LocalRegistryStatus> {
    const state = this.readState();
    if (!state) return { running: false, runDir: this.runDir };
    if (!this.isOurs(state)) {
      rmSync(join(this.runDir, STATE_FILE), { force: true });
      return { running: false, runDir: this.runDir, stale: true };
    }
    return { running: true, runDir: this.runDir, ...describe(state) };
  }

  /** Starts the registry unless one runs from this run folder; resolves when its API answers. */
  async start(): Promise<LocalRegistryStatus> {
    const current = await this.status();
    if (current.running) return { ...current, alreadyRunning: true };
    mkdirSync(join(this.runDir, "logs"), { recursive: true });
    const jar = await this.distribution();
    const port = await choosePort(this.port);
    if (this.port !== 0 && port !== this.port) this.progress(`port ${this.port} is taken; using ${port}`);
    this.progress(`starting Apicurio Registry ${this.version} on 127.0.0.1:${port}`);
    const listen = this.tls
      ? [
          `-Dquarkus.http.ssl-port=${port}`,
          `-Dquarkus.http.port=${await choosePort(0, [port])}`,
          "-Dquarkus.http.insecure-requests=disabled",
          `-Dquarkus.http.ssl.certificate.files=${this.tls.certPath}`,
          `-Dquarkus.http.ssl.certificate.key-files=${this.tls.keyPath}`,
        ]
      : [`-Dquarkus.http.port=${port}`];
    const { pid, exited } = spawnDetached(
      this.javaCommand,
      [
        `-Xmx${this.heapMb}m`,
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        ...listen,
        "-Dquarkus.http.host=127.0.0.1",
        // Marks the process as this run folder's, so stop/status never signal someone else's JVM.
        `-Dsluice.registry.runDir=${this.runDir}`,
        "-jar",
        jar,
      ],
      {
        logFile: join(this.runDir, "logs", "registry.out"),
        cwd: this.runDir,
        env: { ...process.env, REGISTRY_DATASOURCE_URL: this.datasourceUrl() },
        failure: () =>
          new SluiceError(
            "REGISTRY_START_FAILED",
            `could not spawn ${this.javaCommand}; ${REGISTRY_TOOLS_HELP}`,
          ),
      },
    );
    const state: RegistryState = {
      pid,
      port,
      version: this.version,
      startedAt: new Date().toISOString(),
      jar,
      ...(this.tls ? { tls: true } : {}),
    };
    writeFileSync(join(this.runDir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
    try {
      const ca = this.tls ? readFileSync(this.tls.caPath) : undefined;
      await waitForApi(port, ca, this.startTimeoutMs, exited);
    } catch (error) {
      await this.stop();
      throw new SluiceError(
        "REGISTRY_START_FAILED",
        `Apicurio Registry ${this.version} did not answer on 127.0.0.1:${port}: ${(error as Error).message}. ` +
          `Last log lines:\n${this.logTail()}`,
        { cause: error },
      );
    }
    return { running: true, runDir: this.runDir, ...describe(state) };
  }

  /** SIGTERM, then SIGKILL after `stopTimeoutMs`. */
  async stop(): Promise<{ stopped: boolean; pid?: number; forced?: boolean }> {
    const state = this.readState();
    const clear = () => rmSync(join(this.runDir, STATE_FILE), { force: true });
    if (!state || !this.isOurs(state)) {
      clear();
      return { stopped: false };
    }
    const { forced } = await stopService(state.pid, () => this.isOurs(state), this.stopTimeoutMs, "registry");
    clear();
    return { stopped: true, pid: state.pid, forced };
  }

  private datasourceUrl(): string {
    if (this.storage === "memory") return "jdbc:h2:mem:registry_db";
    mkdirSync(join(this.runDir, "data"), { recursive: true });
    return `jdbc:h2:file:${join(this.runDir, "data", "registry")}`;
  }

  private isOurs(state: RegistryState): boolean {
    return isRunningWith(state.pid, [`-Dsluice.registry.runDir=${this.runDir}`, state.jar]);
  }

  /** The runner jar of the unpacked distribution, fetched with Maven on first use. */
  private async distribution(): Promise<string> {
    const home = join(this.cacheDir, `apicurio-registry-${this.version}`);
    const jar = join(home, `apicurio-registry-app-${this.version}-runner.jar`);
    if (existsSync(jar) && existsSync(join(home, "lib"))) return jar;
    mkdirSync(home, { recursive: true });
    this.progress(`fetching Apicurio Registry ${this.version} from Maven Central (first run only)`);
    const artifact = `io.apicurio:apicurio-registry-app:${this.version}:tar.gz:all`;
    try {
      await run(this.mvnCommand, [
        "-q",
        "-B",
        "dependency:copy",
        `-Dartifact=${artifact}`,
        `-DoutputDirectory=${home}`,
      ]);
      const archive = join(home, `apicurio-registry-app-${this.version}-all.tar.gz`);
      await run("tar", ["-xzf", archive, "-C", home]);
      rmSync(archive, { force: true });
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
      throw new SluiceError(
        missing ? "DEPENDENCY_MISSING" : "REGISTRY_START_FAILED",
        missing
          ? `Maven and tar are needed to fetch the registry: ${REGISTRY_TOOLS_HELP}`
          : `could not fetch ${artifact} with Maven (network? version?): ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (!existsSync(jar)) {
      throw new SluiceError("REGISTRY_START_FAILED", `${artifact} did not contain ${jar}`);
    }
    return jar;
  }

  private readState(): RegistryState | undefined {
    const file = join(this.runDir, STATE_FILE);
    if (!existsSync(file)) return undefined;
    try {
      return JSON.parse(readFileSync(file, "utf8")) as RegistryState;
    } catch {
      return undefined;
    }
  }

  private logTail(lines = 20): string {
    const file = join(this.runDir, "logs", "registry.out");
    if (!existsSync(file)) return "(no log output)";
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(no log output)";
  }
}

function describe(state: RegistryState): Omit<LocalRegistryStatus, "running" | "runDir"> {
  return {
    pid: state.pid,
    port: state.port,
    url: `${state.tls ? "https" : "http"}://127.0.0.1:${state.port}${API_PATH}`,
    version: state.version,
    startedAt: state.startedAt,
  };
}

/** Polls `GET /apis/ccompat/v7/subjects` until it answers 200 (over TLS trusting `ca` when given). */
async function waitForApi(
  port: number,
  ca: Buffer | undefined,
  timeoutMs: number,
  exited: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    const died = exited();
    if (died) throw new Error(`the registry process ${died}`);
    const status = await new Promise<number | string>((resolvePromise) => {
      const options = { host: "127.0.0.1", port, path: `${API_PATH}/subjects`, method: "GET", timeout: 2000 };
      const req = (ca ? httpsRequest : request)(ca ? { ...options, ca } : options, (res) => {
        res.resume();
        resolvePromise(res.statusCode ?? 0);
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", (error) => resolvePromise(error.message));
      req.end();
    });
    if (status === 200) return;
    last = String(status);
    await sleep(200);
  }
  throw new Error(`timed out after ${timeoutMs} ms (last answer: ${last})`);
}
