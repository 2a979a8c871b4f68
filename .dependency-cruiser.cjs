/**
 * Architecture rules (docs/design.md §2, docs/architecture.md), checked by `npm run arch` inside `npm test`,
 * so the room map and the code cannot drift apart. Rooms are the folders under src/.
 * Run `npx depcruise src bench test --config .dependency-cruiser.cjs --output-type err-long` for the
 * reasoning behind each violation.
 */
/**
 * A rule named `name`: the room `src/<room>` imports nothing of ours but its own folder, the `allowed`
 * rooms and the `allowedFiles` (paths under src/, such as "sluice-error.ts").
 */
function importsOnly(name, room, allowed, comment, allowedFiles = []) {
  const files = allowedFiles.map((f) => `^src/${f.replace(".", "[.]")}$`);
  return {
    name,
    severity: "error",
    comment,
    from: { path: `^src/${room}/` },
    to: { path: "^src/", pathNot: [`^src/(${[room, ...allowed].join("|")})/`, ...files] },
  };
}

/**
 * The rooms of src/kafka, lowest first: a room imports only the rooms before it, so the kafkajs
 * corrections (protocol) and the client stand alone and the write path never depends on the backfill
 * adapters. (probes reads through `read`, so it comes after it; runs writes through `write`.)
 */
const KAFKA_ROOMS = ["protocol", "client", "read", "write", "probes", "runs"];

function kafkaRoomRules() {
  return KAFKA_ROOMS.slice(0, -1).map((room, i) => ({
    name: `kafka-${room}-below-${KAFKA_ROOMS.slice(i + 1).join("-")}`,
    severity: "error",
    comment:
      `src/kafka/${room} imports none of the rooms above it (${KAFKA_ROOMS.slice(i + 1).join(", ")}): ` +
      "protocol (kafkajs corrections) < client (connection, security, logs, failures, admin) < read (the consumer " +
      "loop and bounded readers) < write (the one transactional write path and its users) < probes " +
      "(observability's broker reads) < runs (backfill run adapters).",
    from: { path: `^src/kafka/${room}/` },
    to: { path: `^src/kafka/(${KAFKA_ROOMS.slice(i + 1).join("|")})/` },
  }));
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...kafkaRoomRules(),
    {
      name: "no-circular",
      severity: "error",
      comment: "Arrows point one way: no import cycles (type-only imports count too).",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-folder-cycles",
      severity: "error",
      scope: "folder",
      comment:
        "Rooms form a one-way graph: no cycle between folders of src/ either (a file-level rule cannot see " +
        "kafka -> events -> kafka through two different files). Type-only imports count: a type is a dependency too.",
      from: { path: "^src/[^/]+" },
      to: { circular: true },
    },
    {
      name: "no-cli-imports",
      severity: "error",
      comment:
        "Nothing depends on src/cli: the CLI parses arguments and calls a composition root in src/app. " +
        "Only the CLI's own unit tests (test/unit/cli/) import it; other tests run it as a process.",
      from: { pathNot: ["^src/cli/", "^test/unit/cli/"] },
      to: { path: "^src/cli/" },
    },
    importsOnly(
      "contracts-stand-alone",
      "contracts",
      [],
      "src/contracts (wire types and codecs) imports nothing of ours outside its own folder (npm packages are fine): " +
        "every room may depend on it, so it depends on none.",
    ),
    importsOnly(
      "time-stands-alone",
      "time",
      [],
      "src/time (the Clock seam: now and timers, faked in tests) imports nothing of ours: the micro-batcher, the " +
        "committer and the guard all take it.",
    ),
    importsOnly(
      "microbatch-sees-only-contracts",
      "microbatch",
      ["contracts", "time"],
      "src/microbatch (the micro-batcher: the lane policy, LaneBatcher) is pure batching logic; it may use " +
        "the contracts' types (Lane) and the Clock seam (src/time) and nothing else of ours.",
    ),
    importsOnly(
      "runs-are-shared-bookkeeping",
      "runs",
      ["contracts"],
      "src/runs (what the offline batch job and backfill runs share: row sources, provenance, cost, part names, " +
        "atomic files) imports only the contracts (and src/sluice-error.ts): batch/ and backfill/ build on it, never " +
        "the other way round.",
      ["sluice-error.ts"],
    ),
    importsOnly(
      "events-are-a-contract",
      "events",
      ["contracts", "microbatch", "time"],
      "src/events (the typed event bus and its payloads) is imported by the stages that emit and by observability " +
        "that listens, so it may import only contracts and the micro-batcher's types.",
    ),
    {
      name: "kafkajs-stays-in-kafka",
      severity: "error",
      comment:
        "Only src/kafka imports kafkajs (not even its types): the rest of Sluice holds the client as the opaque " +
        "KafkaClient of kafka/client/kafka-client.ts and reads records through Sluice's own types (RecordHeaders, " +
        "ports), so the client library can change behind one room.",
      from: { path: "^src/", pathNot: "^src/kafka/" },
      to: { path: "(^|/)node_modules/kafkajs/" },
    },
    {
      name: "observability-only-listens",
      severity: "error",
      comment:
        "src/observability subscribes to events and reads the broker through its ports; it may use events, contracts " +
        "and config, but never drives the pipeline or the entry points.",
      from: { path: "^src/observability/" },
      to: { path: "^src/(processor|app|cli|batch|microbatch|delivery|model|devtools|client)/" },
    },
    {
      name: "observability-reads-ports",
      severity: "error",
      comment:
        "src/observability reads the broker only through its ports (GroupOffsetsReader, RecordTimestampReader, " +
        "HeartbeatSink); their kafkajs adapters live in src/kafka. No src/kafka.",
      from: { path: "^src/observability/" },
      to: { path: ["(^|/)node_modules/kafkajs/", "^src/kafka/"] },
    },
    {
      name: "devtools-stay-dev",
      severity: "error",
      comment:
        "src/devtools (local broker, registry and Zipkin: JVM/Maven tooling) is for development and tests; only the " +
        "CLI's dev commands (kafka, registry, zipkin, demo) use it at run time.",
      from: { path: "^src/", pathNot: "^src/(cli|devtools)/" },
      to: { path: "^src/devtools/" },
    },
    {
      name: "registry-behind-composition-roots",
      severity: "error",
      comment:
        "src/registry (the schema registry HTTP client) is wired into codecs by the composition roots in " +
        "src/app (wire-codecs.ts); the pipeline sees only the contracts' codec seams (RequestDecoder, " +
        "RequestWriterSchemas, ResultEncoder).",
      from: { path: "^src/", pathNot: "^src/(app|registry)/" },
      to: { path: "^src/registry/" },
    },
    {
      name: "registry-speaks-http-only",
      severity: "error",
      comment:
        "src/registry talks to the schema registry over HTTP; it imports no kafkajs and no pipeline room.",
      from: { path: "^src/registry/" },
      to: {
        path: [
          "(^|/)node_modules/kafkajs/",
          "^src/(processor|batch|microbatch|events|delivery|model|kafka|observability|app|cli|devtools)/",
        ],
      },
    },
    {
      name: "tracing-stands-alone",
      severity: "error",
      comment:
        "src/tracing (OpenTelemetry spans, the W3C headers, the export queue) is called by the pipeline and " +
        "imports none of it: only contracts, config and sluice-error.ts. It reads Kafka headers as the " +
        "contracts' RecordHeaders, never through src/kafka.",
      from: { path: "^src/tracing/" },
      to: { path: "^src/", pathNot: ["^src/(tracing|contracts|config)/", "^src/sluice-error\\.ts$"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // Only build output is excluded: excluding node_modules would drop every import of kafkajs and
    // silently disable the transport rules below. doNotFollow keeps the cruise out of packages.
    exclude: { path: "^dist/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      mainFields: ["module", "main", "types", "typings"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
