#!/usr/bin/env bash
# Side-by-side check of a benchmark against an earlier commit (for refactors): builds REV in a temporary
# git worktree, then alternates a reduced run of BENCH for REV and for the working tree, ROUNDS times, on
# one broker, and prints each run's rows. Measures, never asserts; it writes no BENCHMARKS.md section
# (the worktree's copy is thrown away; the working tree's is restored). Do not edit BENCHMARKS.md while
# it runs: the copy saved at its start is written back at its end, over any edit made in between.
#   BENCH = pipeline: bench:pipeline's throughput rows (3000-record drains, 300-record baseline, 5000
#           no-op records, 10 s latency rows, no commit-interval rows; env overrides them);
#           slo: bench:slo's tables (env BENCH_SLO_* as bench/slo-bench.ts reads them; default here
#           1 instance, 10 requests/s, 2 repeats, 20 s alone, 1500 rows);
#           ceiling: bench:ceiling's tables (env BENCH_CEILING_*; default here the no-op mode, one
#           round against Kafka Streams with 2 threads per side and round, no warm-up round, and
#           600,000 records set here, so a revision whose bench had another default drains the same).
#
#   KAFKA_BROKERS=127.0.0.1:19092 bench/ab.sh pipeline|slo|ceiling REV [ROUNDS]
set -euo pipefail
bench="${1:?usage: bench/ab.sh pipeline|slo|ceiling REV [ROUNDS]}"
rev="${2:?usage: bench/ab.sh pipeline|slo|ceiling REV [ROUNDS]}"
rounds="${3:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${KAFKA_BROKERS:?set KAFKA_BROKERS (e.g. start one with: npx sluice kafka start)}"
export KAFKA_BROKERS
case "$bench" in
  pipeline)
    export BENCH_NOOP_RECORDS="${BENCH_NOOP_RECORDS:-5000}" BENCH_BASELINE_RECORDS="${BENCH_BASELINE_RECORDS:-300}"
    export BENCH_OPEN_SECONDS="${BENCH_OPEN_SECONDS:-10}" BENCH_INTERVALS=""
    run() { node dist/bench/pipeline-bench.js 2>&1 | grep -E '"label"|raw batch' | grep -Ev '"fraction"' || true; }
    ;;
  slo)
    export BENCH_SLO_INSTANCES="${BENCH_SLO_INSTANCES:-1}" BENCH_SLO_RATES="${BENCH_SLO_RATES:-10}"
    export BENCH_SLO_REPEATS="${BENCH_SLO_REPEATS:-2}" BENCH_SLO_ALONE_SECONDS="${BENCH_SLO_ALONE_SECONDS:-20}"
    export BENCH_SLO_ROWS="${BENCH_SLO_ROWS:-1500}" BENCH_SLO_OUTPUT=-
    run() { node dist/bench/slo-bench.js 2>/dev/null | grep -E '^\|' || true; }
    ;;
  ceiling)
    export BENCH_CEILING_MODES="${BENCH_CEILING_MODES:-noop}" BENCH_CEILING_ROUNDS="${BENCH_CEILING_ROUNDS:-1}"
    export BENCH_CEILING_KSTREAMS_THREADS="${BENCH_CEILING_KSTREAMS_THREADS:-2}" BENCH_CEILING_WARMUP="${BENCH_CEILING_WARMUP:-0}"
    export BENCH_CEILING_RECORDS="${BENCH_CEILING_RECORDS:-600000}" BENCH_CEILING_OUTPUT=-
    run() { node dist/bench/ceiling-bench.js 2>/dev/null | grep -E '^\||^- Sluice' || true; }
    ;;
  *)
    echo "unknown BENCH $bench: pipeline, slo or ceiling" >&2
    exit 2
    ;;
esac
other="$(mktemp -d)/sluice-ab"
git -C "$root" worktree add -q "$other" "$rev"
trap 'git -C "$root" worktree remove --force "$other"' EXIT
ln -s "$root/node_modules" "$other/node_modules"
[ -d "$root/models" ] && ln -s "$root/models" "$other/models"
(cd "$other" && npx tsc -p tsconfig.build.json)
(cd "$root" && npm run build --silent)
cp "$root/BENCHMARKS.md" "$other.BENCHMARKS.md"
echo "bench/ab.sh: BENCHMARKS.md is saved now and written back at the end; edits to it until then are lost" >&2
for round in $(seq 1 "$rounds"); do
  for side in "$rev" working-tree; do
    dir="$root"; [ "$side" = "$rev" ] && dir="$other"
    echo "=== round $round: $side ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
    (cd "$dir" && run)
  done
done
cp "$other.BENCHMARKS.md" "$root/BENCHMARKS.md"
