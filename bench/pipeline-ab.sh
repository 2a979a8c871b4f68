#!/usr/bin/env bash
# Side-by-side check of the streaming pipeline against an earlier commit (for refactors): builds REV in a
# temporary git worktree, then alternates a reduced `bench:pipeline` of REV and of the working tree,
# ROUNDS times, on one broker, and prints the throughput rows of each run. Measures, never asserts; it
# writes no BENCHMARKS.md section (the worktree's copy is thrown away; the working tree's is restored).
#
#   KAFKA_BROKERS=127.0.0.1:19092 bench/pipeline-ab.sh REV [ROUNDS]
set -euo pipefail
rev="${1:?usage: bench/pipeline-ab.sh REV [ROUNDS]}"
rounds="${2:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${KAFKA_BROKERS:?set KAFKA_BROKERS (e.g. start one with: npx sluice kafka start)}"
export KAFKA_BROKERS BENCH_NOOP_RECORDS="${BENCH_NOOP_RECORDS:-5000}" BENCH_BASELINE_RECORDS="${BENCH_BASELINE_RECORDS:-300}"
export BENCH_OPEN_SECONDS="${BENCH_OPEN_SECONDS:-10}" BENCH_INTERVALS=""
other="$(mktemp -d)/sluice-ab"
git -C "$root" worktree add -q "$other" "$rev"
trap 'git -C "$root" worktree remove --force "$other"' EXIT
ln -s "$root/node_modules" "$other/node_modules"
[ -d "$root/models" ] && ln -s "$root/models" "$other/models"
(cd "$other" && npx tsc -p tsconfig.build.json)
(cd "$root" && npm run build --silent)
cp "$root/BENCHMARKS.md" "$other.BENCHMARKS.md"
for round in $(seq 1 "$rounds"); do
  for side in "$rev" working-tree; do
    dir="$root"; [ "$side" = "$rev" ] && dir="$other"
    echo "=== round $round: $side ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
    (cd "$dir" && node dist/bench/pipeline-bench.js 2>&1 | grep -E '"label"|raw batch' | grep -Ev '"fraction"' || true)
  done
done
cp "$other.BENCHMARKS.md" "$root/BENCHMARKS.md"
