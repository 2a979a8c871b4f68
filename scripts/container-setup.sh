#!/usr/bin/env bash
# Prepares this machine to build and run the Sluice image with podman, without Docker Hub:
#   1. apt-installs podman, runc and debootstrap (Debian/Ubuntu, as root or through sudo);
#   2. writes /etc/containers/containers.conf.d/sluice.conf: runc as the runtime (crun fails on
#      setrlimit and hybrid cgroups here) and container ulimits nofile 20000, nproc 32768 (higher
#      values fail);
#   3. builds a stand-in for the Dockerfile's FROM images: `debootstrap --variant=minbase bookworm`,
#      Node.js 24 from the pinned npm package (scripts/node-runtime.sh; Debian's nodejs is 18), the
#      host's npm and CA certificates copied in, a `node` user with uid 1000 like the official images,
#      then `podman import`, tagged as docker.io/library/node:24-bookworm and node:24-bookworm-slim.
# The Dockerfile stays standard: where Docker Hub is reachable nothing here is needed.
# Idempotent and cached: each step is skipped when its result is already there. SLUICE_BASE_REBUILD=1
# rebuilds the base image.
set -euo pipefail

log() { printf '[container-setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    log "need root to run: $*"
    return 1
  fi
}

BASE_TAGS=(docker.io/library/node:24-bookworm docker.io/library/node:24-bookworm-slim)
SUITE="${SLUICE_BASE_SUITE:-bookworm}"
MIRROR="${SLUICE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# 1. Tools.
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${missing[*]} and apt-get is unavailable; install them by hand"
    exit 2
  fi
  log "installing ${missing[*]} with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" uidmap slirp4netns netavark aardvark-dns fuse-overlayfs >/dev/null
fi

# 2. containers.conf drop-in (podman reads containers.conf.d/*.conf after containers.conf).
conf_dir=/etc/containers/containers.conf.d
conf_file="$conf_dir/sluice.conf"
conf_body='# Written by sluice scripts/container-setup.sh
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
'
if [ ! -f "$conf_file" ] || [ "$(cat "$conf_file")" != "$(printf '%s' "$conf_body")" ]; then
  log "writing $conf_file (runc, ulimits nofile 20000, nproc 32768)"
  as_root mkdir -p "$conf_dir"
  printf '%s' "$conf_body" | as_root tee "$conf_file" >/dev/null
fi

# 3. Base image, rebuilt when a tag is missing or holds another Node.js than the pinned one.
pinned_node="$(bash "$(dirname "$0")/node-runtime.sh" --version)"
have_all=1
for tag in "${BASE_TAGS[@]}"; do
  env_lines="$(as_root podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$tag" 2>/dev/null)" ||
    env_lines=""
  grep -qx "NODE_VERSION=$pinned_node" <<<"$env_lines" || have_all=0
done
if [ "$have_all" -eq 1 ] && [ "${SLUICE_BASE_REBUILD:-0}" != "1" ]; then
  log "base image ${BASE_TAGS[0]} with Node.js $pinned_node present (cached); SLUICE_BASE_REBUILD=1 rebuilds it"
  exit 0
fi

# Node.js: the pinned binary (cached after the first fetch). npm and corepack are plain JavaScript
# and come from the host's installation (npm 11 supports Node 24).
node_bin="$(bash "$(dirname "$0")/node-runtime.sh")/node"
node_version="$("$node_bin" --version)"
host_node="$(command -v node)"
npm_prefix="$(cd "$(dirname "$(readlink -f "$host_node")")/.." && pwd)"

work="$(mktemp -d /var/tmp/sluice-base.XXXXXX)"
trap 'as_root rm -rf "$work"' EXIT
root="$work/rootfs"
started=$(date +%s)
log "debootstrap --variant=minbase $SUITE into $root (a few minutes the first time)"
as_root debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log"
  exit 1
}

log "copying Node.js $node_version ($node_bin) and npm $(npm --version) ($npm_prefix)"
as_root install -m 0755 "$node_bin" "$root/usr/local/bin/node"
as_root mkdir -p "$root/usr/local/lib/node_modules"
for pkg in npm corepack; do
  if [ -d "$npm_prefix/lib/node_modules/$pkg" ]; then
    as_root cp -a "$npm_prefix/lib/node_modules/$pkg" "$root/usr/local/lib/node_modules/"
  fi
done
as_root ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
as_root ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

# CA certificates: the host's bundle (node reads it through NODE_EXTRA_CA_CERTS) and its extra CAs
# in /usr/local/share/ca-certificates, which update-ca-certificates merges (and hands to Java) when a
# build stage installs the ca-certificates package.
log "copying the host's CA certificates"
as_root mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
as_root cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  as_root cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

# The official node images have a `node` user (uid/gid 1000).
as_root chroot "$root" groupadd --gid 1000 node
as_root chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
as_root chroot "$root" apt-get clean
as_root rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin

log "podman import as ${BASE_TAGS[*]}"
as_root tar -C "$root" -c . | as_root podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_VERSION='"${node_version#v}" \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' \
  - "${BASE_TAGS[0]}" >/dev/null
for tag in "${BASE_TAGS[@]:1}"; do as_root podman tag "${BASE_TAGS[0]}" "$tag"; done
log "base image ready in $(($(date +%s) - started)) s"
