#!/usr/bin/env bash
# `npm test`: lint, typecheck and arch beside the vitest run instead of before it. The three checks
# read only the sources, so they need no broker and fill the cores while the tests wait on Kafka and
# on the processes they start; they run at a lower CPU priority (nice 10) so the tests' timing stays
# the same. Their output is kept and printed when vitest is done: a line each when they pass, the
# whole output when one fails. Arguments go to `vitest run` (e.g. `npm test -- --project unit`).
set -u
cd "$(dirname "$0")/.."

checks=(lint typecheck arch)
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
pids=()
for check in "${checks[@]}"; do
  nice -n 10 npm run --silent "$check" >"$logs/$check.log" 2>&1 &
  pids+=("$!")
done

npx vitest run "$@"
status=$?

for i in "${!checks[@]}"; do
  if wait "${pids[$i]}"; then
    printf '[npm test] npm run %s: passed\n' "${checks[$i]}"
  else
    printf '[npm test] npm run %s: FAILED\n' "${checks[$i]}"
    cat "$logs/${checks[$i]}.log"
    status=1
  fi
done
exit "$status"
