#!/usr/bin/env bash
# Validates the Prometheus config and alert rules with promtool (Debian/Ubuntu: apt-get install prometheus,
# or the official release tarball). Exits 0 with a notice when promtool is missing unless REQUIRE_PROMTOOL=1.
set -euo pipefail
cd "$(dirname "$0")/../deploy/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "check-alerts: promtool not found; install Prometheus (e.g. apt-get install prometheus) to check the rules" >&2
  [ "${REQUIRE_PROMTOOL:-0}" = "1" ] && exit 1
  exit 0
fi
promtool check rules alerts.yml
promtool check config prometheus.yml
promtool test rules alerts.test.yml
