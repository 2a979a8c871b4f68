import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { packageRoot } from "../config/project-paths.js";
import { SluiceError, type SluiceErrorCode } from "../sluice-error.js";
import { choosePort, isRunningWith, spawnDetached } from "./broker-process.js";
import {
  fetchFromMaven,
  logTail,
  readStateFile,
  requireJava,
  stopService,
  waitForHttp,
} from "./jvm-service.js";

/**
 * A local Zipkin server for development and the tracing tests, run like the local broker and
 * registry: Java 17 and Maven, no Docker. The `io.zipkin:zipkin-server:<version>:jar:exec` jar is
 * fetched from Maven Central once into a cache folder (never committed) and run with `java -jar`
 * (3.x jars have no launch script), with in-memory storage (spans are gone at stop), its collectors
 * other than HTTP off, and its one listener bound to 127.0.0.1. State and logs live in one run
 * folder; it only ever signals the pid it recorded there, after checking that pid is still this
 * Zipkin. API: POST /api/v2/spans, GET /api/v2/trace/{id}, /api/v2/traces?serviceName=, /health.
 */
export interface LocalZipkinOptions {
  /** Run folder for state and logs. Default `<package>/.sluice/zipkin` (git-ignored). */
  runDir?: string;
  /** Zipkin server version. Default "3.6.1". */
  version?: string;
  /** Preferred port on 127.0.0.1. Default 9411; when taken a free port is chosen. 0 = any free port. */
  port?: number;
  /** Max JVM heap, MiB. Default 256. */
  heapMb?: number;
  /** Most spans kept in memory (the oldest traces go first). Default 100000. */
  maxSpans?: number;
  /** Where the jar is fetched. Default `<package>/.sluice/cache`. */
  cacheDir?: string;
  /** How long `start` waits for /health to say UP, ms. Default 90000. */
  startTimeoutMs?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL, ms. Default 15000. */
  stopTimeoutMs?: number;
  /** Java executable. Default `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java`. */
  javaCommand?: string;
  /** Maven executable. Default `mvn`. */
  mvnCommand?: string;
  onProgress?: (message: string) => void;
}

export interface LocalZipkinStatus {
  running: boolean;
  runDir: string;
  pid?: number;
  port?: number;
  /** The server's base URL (UI at /zipkin/, API at /api/v2/). */
  url?: string;
  /** Where exporters send spans: what OTEL_EXPORTER_ZIPKIN_ENDPOINT is set to. */
  spansEndpoint?: string;
  version?: string;
  startedAt?: string;
  alreadyRunning?: boolean;
  stale?: boolean;
}

interface ZipkinState {
  pid: number;
  port: number;
  version: string;
  startedAt: string;
  jar: string;
}

const STATE_FILE = "zipkin.json";
const LOG_FILE = "zipkin.out";
const MIN_JAVA = 17;
/** No code of its own yet: a failed start of a local dev server is reported like the broker's. */
const START_FAILED: SluiceErrorCode = "BROKER_START_FAILED";

export const ZIPKIN_TOOLS_HELP =
  "install Java 17+ and Maven (e.g. `apt-get install openjdk-17-jre-headless maven`), or point OTEL_EXPORTER_ZIPKIN_ENDPOINT at an existing Zipkin";

/**
 * The server's environment: in-memory storage, no self-tracing, and every collector or registration
 * that could reach beyond this machine off, whatever the caller's environment says.
 */
function zipkinEnv(port: number, maxSpans: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    QUERY_PORT: String(port),
    STORAGE_TYPE: "mem",
    MEM_MAX_SPANS: String(maxSpans),
    SELF_TRACING_ENABLED: "false",
    COLLECTOR_HTTP_ENABLED: "true",
    COLLECTOR_GRPC_ENABLED: "false",
    COLLECTOR_SCRIBE_ENABLED: "false",
    COLLECTOR_KAFKA_ENABLED: "false",
    COLLECTOR_RABBITMQ_ENABLED: "false",
    COLLECTOR_ACTIVEMQ_ENABLED: "false",
    COLLECTOR_PULSAR_ENABLED: "false",
    DISCOVERY_EUREKA_ENABLED: "false",
  };
}

export class LocalZipkin {
  readonly runDir: string;
  readonly version: string;
  private readonly port: number;
  private readonly heapMb: number;
  private readonly maxSpans: number;
  private readonly cacheDir: string;
  private readonly startTimeoutMs: number;
  private readonly stopTimeoutMs: number;
  private readonly javaCommand: string;
  private readonly mvnCommand: string;
  private readonly progress: (message: string) => void;

  constructor(options: LocalZipkinOptions = {}) {
    this.runDir = resolve(options.runDir ?? join(packageRoot(), ".sluice", "zipkin"));
    this.version = options.version ?? "3.6.1";
    this.port = options.port ?? 9411;
    this.heapMb = options.heapMb ?? 256;
    this.maxSpans = options.maxSpans ?? 100_000;
    this.cacheDir = resolve(options.cacheDir ?? join(packageRoot(), ".sluice", "cache"));
    this.startTimeoutMs = options.startTimeoutMs ?? 90_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 15_000;
    this.javaCommand =
      options.javaCommand ??
      (process.env["JAVA_HOME"] ? join(process.env["JAVA_HOME"], "bin", "java") : "java");
    this.mvnCommand = options.mvnCommand ?? "mvn";
    this.progress = options.onProgress ?? (() => {});
    if (!/^\d+\.\d+\.\d+$/.test(this.version)) {
      throw new SluiceError("CONFIG_INVALID", `Zipkin version "${this.version}" is not like 3.6.1`);
    }
    if (!Number.isInteger(this.port) || this.port < 0 || this.port > 65_535) {
      throw new SluiceError("CONFIG_INVALID", `Zipkin port ${this.port} must be an integer 0..65535`);
    }
  }

  async status(): Promise<LocalZipkinStatus> {
    const state = readStateFile<ZipkinState>(join(this.runDir, STATE_FILE));
    if (!state) return { running: false, runDir: this.runDir };
    if (!this.isOurs(state)) {
      rmSync(join(this.runDir, STATE_FILE), { force: true });
      return { running: false, runDir: this.runDir, stale: true };
    }
    return { running: true, runDir: this.runDir, ...describe(state) };
  }

  /** Starts Zipkin unless one runs from this run folder; resolves when /health says UP. */
  async start(): Promise<LocalZipkinStatus> {
    const current = await this.status();
    if (current.running) return { ...current, alreadyRunning: true };
    await requireJava(this.javaCommand, MIN_JAVA, `Zipkin ${this.version}`, ZIPKIN_TOOLS_HELP);
    mkdirSync(join(this.runDir, "logs"), { recursive: true });
    const jar = await this.jar();
    const port = await choosePort(this.port);
    if (this.port !== 0 && port !== this.port) this.progress(`port ${this.port} is taken; using ${port}`);
    this.progress(`starting Zipkin ${this.version} on 127.0.0.1:${port} (in-memory storage)`);
    const { pid, exited } = spawnDetached(
      this.javaCommand,
      [
        `-Xmx${this.heapMb}m`,
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        // Marks the process as this run folder's, so stop/status never signal someone else's JVM.
        `-Dsluice.zipkin.runDir=${this.runDir}`,
        "-jar",
        jar,
        // Its one listener (Armeria), on loopback only: the jar's default binds every interface.
        // Spring replaces a list as a whole, so the port and protocol are given with the address.
        `--armeria.ports[0].port=${port}`,
        "--armeria.ports[0].ip=127.0.0.1",
        "--armeria.ports[0].protocols[0]=http",
      ],
      {
        logFile: join(this.runDir, "logs", LOG_FILE),
        cwd: this.runDir,
        env: zipkinEnv(port, this.maxSpans),
        failure: () =>
          new SluiceError(START_FAILED, `could not spawn ${this.javaCommand}; ${ZIPKIN_TOOLS_HELP}`),
      },
    );
    const state: ZipkinState = { pid, port, version: this.version, startedAt: new Date().toISOString(), jar };
    writeFileSync(join(this.runDir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
    try {
      await waitForHttp(
        port,
        "/health",
        (status, body) => status === 200 && body.includes('"UP"'),
        this.startTimeoutMs,
        exited,
      );
    } catch (error) {
      await this.stop();
      throw new SluiceError(
        START_FAILED,
        `Zipkin ${this.version} did not become healthy on 127.0.0.1:${port}: ${(error as Error).message}. ` +
          `Last log lines:\n${logTail(join(this.runDir, "logs", LOG_FILE))}`,
        { cause: error },
      );
    }
    return { running: true, runDir: this.runDir, ...describe(state) };
  }

  /** SIGTERM, then SIGKILL after `stopTimeoutMs`. In-memory spans are gone afterwards. */
  async stop(): Promise<{ stopped: boolean; pid?: number; forced?: boolean }> {
    const state = readStateFile<ZipkinState>(join(this.runDir, STATE_FILE));
    const clear = () => rmSync(join(this.runDir, STATE_FILE), { force: true });
    if (!state || !this.isOurs(state)) {
      clear();
      return { stopped: false };
    }
    const { forced } = await stopService(state.pid, () => this.isOurs(state), this.stopTimeoutMs, "Zipkin");
    clear();
    return { stopped: true, pid: state.pid, forced };
  }

  private isOurs(state: ZipkinState): boolean {
    return isRunningWith(state.pid, [`-Dsluice.zipkin.runDir=${this.runDir}`, state.jar]);
  }

  /** The server jar, fetched with Maven on first use. */
  private async jar(): Promise<string> {
    const home = join(this.cacheDir, `zipkin-${this.version}`);
    const jar = join(home, `zipkin-server-${this.version}-exec.jar`);
    if (existsSync(jar)) return jar;
    mkdirSync(home, { recursive: true });
    this.progress(`fetching Zipkin ${this.version} from Maven Central (first run only)`);
    const artifact = `io.zipkin:zipkin-server:${this.version}:jar:exec`;
    await fetchFromMaven(this.mvnCommand, artifact, home, { failure: START_FAILED, help: ZIPKIN_TOOLS_HELP });
    if (!existsSync(jar)) throw new SluiceError(START_FAILED, `${artifact} did not give ${jar}`);
    return jar;
  }
}

function describe(state: ZipkinState): Omit<LocalZipkinStatus, "running" | "runDir"> {
  const url = `http://127.0.0.1:${state.port}`;
  return {
    pid: state.pid,
    port: state.port,
    url,
    spansEndpoint: `${url}/api/v2/spans`,
    version: state.version,
    startedAt: state.startedAt,
  };
}
