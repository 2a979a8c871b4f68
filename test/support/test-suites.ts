/**
 * Which test files run in which npm script (README, "Tests and Kafka"). `npm test` runs test/unit,
 * test/integration and test/e2e except the component and scenario tests below; `npm run
 * test:components` runs those. `.ci/run` runs both, so every file runs in CI.
 *
 * A component test is one that needs a heavy component of its own besides the shared broker, or the
 * real default model (int8 BGE-small, ~120 items/s per core) for long enough that it dominates a run:
 */
export const COMPONENT_TESTS = [
  // A second broker JVM: `sluice kafka start|status|stop` against its own run folder.
  "test/e2e/cli-kafka.test.ts",
  // Apicurio Registry (a JVM of its own), one per file.
  "test/e2e/schema-registry.test.ts",
  // Headless Chromium against a serve running the default model.
  "test/e2e/live-page.test.ts",
  // The real default model: its download, its outputs, and the invariants under real inference cost.
  "test/e2e/model-real.test.ts",
  "test/e2e/v2-text-default-model.test.ts",
  "test/e2e/batch-kafka-default-model.test.ts",
  "test/e2e/processor-demo.test.ts",
  "test/e2e/processor-crash.test.ts",
  "test/e2e/processor-shutdown.test.ts",
  "test/e2e/backfill-group.test.ts",
];

/**
 * A scenario test plays a long multi-process story against the shared broker: several `sluice serve`
 * or CLI processes, SIGKILL/SIGSTOP and restarts, resumes, a group switch, a trace backend. Each takes
 * about a minute and together they were half of `npm test`'s broker time; `npm test` keeps one
 * real-process smoke test per command (cli-operator, serve-lag-at-rest, tensor-serve, tensor-cli,
 * batch-kafka-cli, observability-serve), the in-process integration tests cover the same rules.
 */
export const SCENARIO_TESTS = [
  // Zombies fenced, members joining and leaving under traffic, the logging policy across a crash.
  "test/e2e/processor-group.test.ts",
  // Two serve processes: shadow, a candidate backfill, promote with a member killed, rollback.
  "test/e2e/model-upgrade.test.ts",
  // Batch CLI: SIGKILL and SIGINT mid-run and resume, reruns, --retry-failed, a changed config.
  "test/e2e/batch-cli.test.ts",
  // Backfill CLI: submit refusals, idempotent resubmit, a submit SIGKILLed mid-run, a topic range.
  "test/e2e/backfill-cli.test.ts",
  // A Zipkin server (a JVM of its own) as the trace backend, under serve and in-process.
  "test/e2e/tracing-serve.test.ts",
  "test/integration/tracing-zipkin.test.ts",
];

/**
 * A CPU test measures how the machine's CPU is shared (threads against a neighbour process, the online
 * tail beside a backfill), so no other test file may run beside it: `npm run test:cpu` runs them one
 * file at a time, after the component tests in `.ci/run`.
 */
export const CPU_TESTS = [
  // The backfill CPU budget against a CPU-hungry neighbour process.
  "test/integration/backfill-cpu-budget.test.ts",
  // The backfill lane's headroom: idle CPU kept beside a CPU-hungry neighbour process.
  "test/integration/backfill-cpu-headroom.test.ts",
  // The online tail in the first seconds of a backfill (a CPU-heavy model, a submit process).
  "test/integration/processor-guard-start.test.ts",
];

/** What `npm run test:components` runs and `npm test` leaves to it. */
export const SLOW_SUITE_TESTS = [...COMPONENT_TESTS, ...SCENARIO_TESTS];
