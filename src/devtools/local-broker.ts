import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { packageRoot } from "../config/project-paths.js";
import type { KafkaSecuritySettings } from "../kafka/client/kafka-client.js";
import { waitUntilReady, warmUpCoordinators } from "../kafka/probes/broker-readiness.js";
import { SluiceError } from "../sluice-error.js";
import { type BrokerState, choosePort, isOurBroker, run, spawnDetached } from "./broker-process.js";
import { stopService } from "./jvm-service.js";

/**
 * A single-node Apache Kafka (KRaft, broker+controller) run straight from Maven Central jars, so
 * development and tests need Java and Maven but no Docker. Everything it owns (state, logs, data,
 * cached classpath) lives under one run folder; it only ever signals the pid it recorded there.
 */
export interface LocalBrokerOptions {
  /** Run folder for state, logs and data. Default `<package>/.sluice/kafka` (git-ignored). */
  runDir?: string;
  /** Apache Kafka version. Default "3.9.1"; 4.x selects the `kafka4` pom profile (log4j2). */
  kafkaVersion?: string;
  /** Preferred client port on 127.0.0.1. Default 19092; when taken a free port is chosen. 0 = any free port. */
  port?: number;
  /** Max JVM heap, MiB. Default 1024. */
  heapMb?: number;
  /** How long `start` waits for the broker to answer an admin request, ms. Default 120000. */
  startTimeoutMs?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL, ms. Default 30000. */
  stopTimeoutMs?: number;
  /** Standalone pom that lists the broker jars. Default `<package>/deploy/local-kafka/pom.xml`. */
  pomPath?: string;
  /** Where resolved classpaths are cached (keyed by version and pom content). Default `runDir`. */
  classpathCacheDir?: string;
  /** Java executable. Default `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java`. */
  javaCommand?: string;
  /** Maven executable. Default `mvn`. */
  mvnCommand?: string;
  /** Progress lines for humans (resolving jars, formatting storage, ...). Default: silent. */
  onProgress?: (message: string) => void;
  /** How clients reach the broker. Default: one PLAINTEXT listener (secure-broker.ts has SASL_SSL). */
  listeners?: BrokerListeners;
}

/** The listener layout of the broker: what `server.properties` says about listeners and security. */
export interface BrokerListeners {
  /** Writes what the layout needs into the run folder (certificates, credentials); every start. */
  prepare(runDir: string, usedPorts: number[]): Promise<void>;
  /** The listener and security lines of server.properties. */
  properties(port: number, controllerPort: number): string[];
  /** Extra `StorageTool format` arguments (e.g. `--add-scram` users). */
  formatArgs(): string[];
  /** kafkajs settings of an administrator, for the readiness probes. */
  adminClient(): KafkaSecuritySettings;
}

const PLAINTEXT_LISTENERS: BrokerListeners = {
  prepare: async () => {},
  properties: (port, controllerPort) => [
    `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    "inter.broker.listener.name=PLAINTEXT",
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
  ],
  formatArgs: () => [],
  adminClient: () => ({}),
};

export interface LocalBrokerStatus {
  running: boolean;
  runDir: string;
  pid?: number;
  /** host:port clients connect to. */
  bootstrap?: string;
  kafkaVersion?: string;
  startedAt?: string;
  /** True when `start` found a broker already running and did not start another. */
  alreadyRunning?: boolean;
  /** Set when a state file pointed at a process that no longer exists (cleaned up). */
  stale?: boolean;
}

const STATE_FILE = "broker.json";
const MIN_JAVA_FOR_3 = 11;
const MIN_JAVA_FOR_4 = 17;

export const MISSING_TOOLS_HELP =
  "install Java 17+ and Maven (e.g. `apt-get install openjdk-17-jre-headless maven` or `brew install openjdk@17 maven`), " +
  "or run Kafka with Docker (`docker compose up -d kafka`), or point Sluice at an existing broker with KAFKA_BROKERS=host:port";

export class LocalBroker {
  readonly runDir: string;
  readonly kafkaVersion: string;
  private readonly port: number;
  private readonly heapMb: number;
  private readonly startTimeoutMs: number;
  private readonly stopTimeoutMs: number;
  private readonly pomPath: string;
  private readonly classpathCacheDir: string;
  private readonly javaCommand: string;
  private readonly mvnCommand: string;
  private readonly progress: (message: string) => void;
  private readonly listeners: BrokerListeners;

  constructor(options: LocalBrokerOptions = {}) {
    this.runDir = resolve(options.runDir ?? join(packageRoot(), ".sluice", "kafka"));
    this.kafkaVersion = options.kafkaVersion ?? "3.9.1";
    this.port = options.port ?? 19092;
    this.heapMb = options.heapMb ?? 1024;
    this.startTimeoutMs = options.startTimeoutMs ?? 120_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 30_000;
    this.pomPath = resolve(options.pomPath ?? join(packageRoot(), "deploy", "local-kafka", "pom.xml"));
    this.classpathCacheDir = resolve(options.classpathCacheDir ?? this.runDir);
    this.javaCommand =
      options.javaCommand ??
      (process.env["JAVA_HOME"] ? join(process.env["JAVA_HOME"], "bin", "java") : "java");
    this.mvnCommand = options.mvnCommand ?? "mvn";
    this.progress = options.onProgress ?? (() => {});
    this.listeners = options.listeners ?? PLAINTEXT_LISTENERS;

    if (!/^\d+\.\d+\.\d+$/.test(this.kafkaVersion)) {
      throw new SluiceError("CONFIG_INVALID", `kafka version "${this.kafkaVersion}" is not like 3.9.1`);
    }
    if (!Number.isInteger(this.port) || this.port < 0 || this.port > 65_535) {
      throw new SluiceError("CONFIG_INVALID", `broker port ${this.port} must be an integer 0..65535`);
    }
    if (!Number.isInteger(this.heapMb) || this.heapMb < 128) {
      throw new SluiceError("CONFIG_INVALID", `broker heapMb ${this.heapMb} must be an integer >= 128`);
    }
  }

  private get majorVersion(): number {
    return Number(this.kafkaVersion.split(".")[0]);
  }

  /** Reports the broker recorded in the run folder; removes the record if its process is gone. */
  async status(): Promise<LocalBrokerStatus> {
    const state = this.readState();
    if (!state) return { running: false, runDir: this.runDir };
    if (!isOurBroker(state)) {
      rmSync(join(this.runDir, STATE_FILE), { force: true });
      return { running: false, runDir: this.runDir, stale: true };
    }
    return {
      running: true,
      runDir: this.runDir,
      pid: state.pid,
      bootstrap: `127.0.0.1:${state.port}`,
      kafkaVersion: state.kafkaVersion,
      startedAt: state.startedAt,
    };
  }

  /** Starts the broker unless one is already running from this run folder; resolves when it answers. */
  async start(): Promise<LocalBrokerStatus> {
    const current = await this.status();
    if (current.running) return { ...current, alreadyRunning: true };

    mkdirSync(join(this.runDir, "logs"), { recursive: true });
    await this.checkJava();
    const classpath = await this.classpath();

    const port = await choosePort(this.port);
    if (this.port !== 0 && port !== this.port) this.progress(`port ${this.port} is taken; using ${port}`);
    const controllerPort = await choosePort(port + 1, [port]);
    await this.listeners.prepare(this.runDir, [port, controllerPort]);
    const dataDir = join(this.runDir, `data-${this.kafkaVersion}`);
    const serverProperties = join(this.runDir, "server.properties");
    writeFileSync(serverProperties, this.serverProperties(port, controllerPort, dataDir));
    const logConfig = this.writeLogConfig();

    if (!existsSync(join(dataDir, "meta.properties"))) {
      this.progress(`formatting KRaft storage in ${dataDir}`);
      const jvm = ["-Xmx256m", ...logConfig, "-cp", classpath, "kafka.tools.StorageTool"];
      const clusterId =
        (await run(this.javaCommand, [...jvm, "random-uuid"])).trim().split(/\s+/).pop() ?? "";
      await run(this.javaCommand, [
        ...jvm,
        "format",
        "-t",
        clusterId,
        "-c",
        serverProperties,
        ...this.listeners.formatArgs(),
      ]);
    }

    this.progress(`starting Apache Kafka ${this.kafkaVersion} on 127.0.0.1:${port}`);
    // Detached with its own session so the broker outlives the CLI that started it.
    const { pid, exited } = spawnDetached(
      this.javaCommand,
      [
        `-Xmx${this.heapMb}m`,
        `-Xms${Math.min(256, this.heapMb)}m`,
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        `-Dkafka.logs.dir=${join(this.runDir, "logs")}`,
        ...logConfig,
        "-cp",
        classpath,
        "kafka.Kafka",
        serverProperties,
      ],
      {
        logFile: join(this.runDir, "logs", "kafka.out"),
        cwd: this.runDir,
        failure: () =>
          new SluiceError(
            "BROKER_START_FAILED",
            `could not spawn ${this.javaCommand}; ${MISSING_TOOLS_HELP}`,
          ),
      },
    );

    const state: BrokerState = {
      pid,
      port,
      controllerPort,
      kafkaVersion: this.kafkaVersion,
      startedAt: new Date().toISOString(),
      serverProperties,
    };
    writeFileSync(join(this.runDir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
    writeFileSync(join(this.runDir, "kafka.pid"), `${pid}\n`);

    const bootstrap = `127.0.0.1:${port}`;
    try {
      await waitUntilReady(bootstrap, this.startTimeoutMs, exited, this.listeners.adminClient());
      await warmUpCoordinators(bootstrap, 30_000, this.listeners.adminClient());
    } catch (error) {
      await this.stop();
      throw new SluiceError(
        "BROKER_START_FAILED",
        `Kafka ${this.kafkaVersion} did not become ready on ${bootstrap}: ${(error as Error).message}. ` +
          `Last log lines:\n${this.logTail()}\nFull logs: ${join(this.runDir, "logs")}`,
        { cause: error },
      );
    }
    return {
      running: true,
      runDir: this.runDir,
      pid,
      bootstrap,
      kafkaVersion: this.kafkaVersion,
      startedAt: state.startedAt,
    };
  }

  /** Stops the recorded broker: SIGTERM, then SIGKILL after `stopTimeoutMs`. Returns the pid it stopped. */
  async stop(): Promise<{ stopped: boolean; pid?: number; forced?: boolean }> {
    const state = this.readState();
    const clear = () => {
      rmSync(join(this.runDir, STATE_FILE), { force: true });
      rmSync(join(this.runDir, "kafka.pid"), { force: true });
    };
    if (!state || !isOurBroker(state)) {
      clear();
      return { stopped: false };
    }
    const { forced } = await stopService(state.pid, () => isOurBroker(state), this.stopTimeoutMs, "Kafka");
    clear();
    return { stopped: true, pid: state.pid, forced };
  }

  private readState(): BrokerState | undefined {
    const file = join(this.runDir, STATE_FILE);
    if (!existsSync(file)) return undefined;
    try {
      return JSON.parse(readFileSync(file, "utf8")) as BrokerState;
    } catch {
      return undefined;
    }
  }

  private async checkJava(): Promise<void> {
    let output: string;
    try {
      output = await run(this.javaCommand, ["-version"], { stderr: true });
    } catch (error) {
      throw new SluiceError(
        "DEPENDENCY_MISSING",
        `Java is needed to run a local Kafka broker: ${MISSING_TOOLS_HELP}`,
        {
          cause: error,
        },
      );
    }
    const match = /version "(\d+)(?:\.(\d+))?/.exec(output);
    const major = match ? (match[1] === "1" ? Number(match[2]) : Number(match[1])) : 0;
    const needed = this.majorVersion >= 4 ? MIN_JAVA_FOR_4 : MIN_JAVA_FOR_3;
    if (major < needed) {
      throw new SluiceError(
        "DEPENDENCY_MISSING",
        `Kafka ${this.kafkaVersion} needs Java ${needed}+, found ${match ? major : "an unknown version"}: ${MISSING_TOOLS_HELP}`,
      );
    }
  }

  /** Broker classpath from Maven, cached per version and pom content (re-resolved if a jar vanished). */
  private async classpath(): Promise<string> {
    const pomHash = createHash("sha256").update(readFileSync(this.pomPath)).digest("hex").slice(0, 8);
    const cacheFile = join(this.classpathCacheDir, `classpath-${this.kafkaVersion}-${pomHash}.txt`);
    if (existsSync(cacheFile)) {
      const cached = readFileSync(cacheFile, "utf8").trim();
      if (cached !== "" && cached.split(delimiter).every((jar) => existsSync(jar))) return cached;
    }
    mkdirSync(this.classpathCacheDir, { recursive: true });
    this.progress(`resolving Apache Kafka ${this.kafkaVersion} jars with Maven (first run only)`);
    const args = [
      "-q",
      "-B",
      "-f",
      this.pomPath,
      "dependency:build-classpath",
      `-Dkafka.version=${this.kafkaVersion}`,
      `-Dmdep.outputFile=${cacheFile}`,
    ];
    if (this.majorVersion >= 4) args.push("-Dkafka4");
    try {
      await run(this.mvnCommand, args);
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
      throw new SluiceError(
        missing ? "DEPENDENCY_MISSING" : "BROKER_START_FAILED",
        missing
          ? `Maven is needed to fetch the Kafka broker jars: ${MISSING_TOOLS_HELP}`
          : `Maven could not resolve Apache Kafka ${this.kafkaVersion} from ${this.pomPath} (network? version?): ${(error as Error).message}`,
        { cause: error },
      );
    }
    return readFileSync(cacheFile, "utf8").trim();
  }

  private serverProperties(port: number, controllerPort: number, dataDir: string): string {
    return `${[
      "# Written by `sluice kafka start`; edits are overwritten on the next start.",
      "process.roles=broker,controller",
      "node.id=1",
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      "controller.listener.names=CONTROLLER",
      ...this.listeners.properties(port, controllerPort),
      `log.dirs=${dataDir}`,
      "num.partitions=1",
      "offsets.topic.replication.factor=1",
      "offsets.topic.num.partitions=3",
      "transaction.state.log.replication.factor=1",
      "transaction.state.log.min.isr=1",
      "transaction.state.log.num.partitions=3",
      "group.initial.rebalance.delay.ms=0",
      "auto.create.topics.enable=true",
      "log.retention.hours=24",
      "log.segment.bytes=67108864",
    ].join("\n")}\n`;
  }

  /** Quiet logging: everything goes to `<runDir>/logs/server.log` (rolled), nothing to the console. */
  private writeLogConfig(): string[] {
    const logFile = join(this.runDir, "logs", "server.log");
    if (this.majorVersion >= 4) {
      const file = join(this.runDir, "log4j2.properties");
      writeFileSync(
        file,
        [
          "status = warn",
          "appender.file.type = RollingFile",
          "appender.file.name = file",
          `appender.file.fileName = ${logFile}`,
          `appender.file.filePattern = ${logFile}.%i`,
          "appender.file.layout.type = PatternLayout",
          "appender.file.layout.pattern = [%d] %p %m (%c)%n",
          "appender.file.policies.type = Policies",
          "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
          "appender.file.policies.size.size = 10MB",
          "appender.file.strategy.type = DefaultRolloverStrategy",
          "appender.file.strategy.max = 2",
          "rootLogger.level = info",
          "rootLogger.appenderRef.file.ref = file",
          "logger.request.name = kafka.request.logger",
          "logger.request.level = warn",
          "logger.state.name = state.change.logger",
          "logger.state.level = warn",
          "",
        ].join("\n"),
      );
      return [`-Dlog4j2.configurationFile=${file}`];
    }
    const file = join(this.runDir, "log4j.properties");
    writeFileSync(
      file,
      [
        "log4j.rootLogger=INFO, file",
        "log4j.appender.file=org.apache.log4j.RollingFileAppender",
        `log4j.appender.file.File=${logFile}`,
        "log4j.appender.file.MaxFileSize=10MB",
        "log4j.appender.file.MaxBackupIndex=2",
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
        "log4j.logger.kafka.request.logger=WARN",
        "log4j.logger.state.change.logger=WARN",
        "",
      ].join("\n"),
    );
    return [`-Dlog4j.configuration=file:${file}`];
  }

  private logTail(lines = 20): string {
    for (const name of ["server.log", "kafka.out"]) {
      const file = join(this.runDir, "logs", name);
      if (!existsSync(file)) continue;
      const text = readFileSync(file, "utf8").trimEnd();
      if (text) return text.split("\n").slice(-lines).join("\n");
    }
    return "(no log output)";
  }
}
