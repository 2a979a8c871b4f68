#!/usr/bin/env bash
# `npm run prepare`: builds dist/ (`npm run build`), which bin/sluice.js runs. npm runs it after
# `npm install` / `npm ci` in a clone, and also whenever `npx sluice …` (npm exec) in this directory
# finds a cold npx cache: npx then links the project into that cache as a `file:` dependency and runs
# its `prepare`. A build at that moment rewrites every file of dist/ under the sluice processes already
# running from it (a worker thread or a later import can read a half-written module), and delays the
# command by a full type-checked build. So under npm exec, a dist/ that is there is used as it is; run
# `npm run build` after changing the sources.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${npm_command:-}" = "exec" ] && [ -f dist/src/cli/main.js ]; then
  exit 0
fi
exec npm run build --silent
