#!/usr/bin/env bash
# docker-setup.sh — make this machine ready for Outpost's Docker sandboxes.
#
# Idempotent; used by CI (.ci/run) and by developers. Each step is skipped when
# its result is already there:
#
#   1. the Docker engine (docker.io) and debootstrap are installed (apt-get);
#   2. the daemon answers; if not, dockerd is started in the background, logging
#      to $OUTPOST_DOCKERD_LOG (default /var/log/outpost-dockerd.log), and the
#      script waits for it (bounded by $OUTPOST_DOCKERD_WAIT seconds, default 60);
#   3. the image debian:bookworm-slim exists; if not, it is built offline-style
#      with `debootstrap --variant=minbase bookworm` from the Debian mirror this
#      machine's apt already uses (read from its sources, never hard-coded) and
#      loaded with `docker import` — no image registry is needed;
#   4. the Outpost base image (default tag outpost/base:dev, override with
#      $OUTPOST_BASE_IMAGE) exists; if not, it is built from .outpost/Dockerfile.
#      Set OUTPOST_REBUILD_BASE=1 to rebuild it anyway.
#
# Installing packages and starting dockerd need root; the script says so when
# it is not root and a step needs it.
set -euo pipefail

log() { printf 'docker-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base_image=${OUTPOST_BASE_IMAGE:-outpost/base:dev}
debian_image=debian:bookworm-slim
dockerd_log=${OUTPOST_DOCKERD_LOG:-/var/log/outpost-dockerd.log}
dockerd_wait=${OUTPOST_DOCKERD_WAIT:-60}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root to run: $*"
	fi
}

# --- 1. packages --------------------------------------------------------------
need=()
command -v docker >/dev/null 2>&1 && command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
	log "installing ${need[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
else
	log "docker and debootstrap are installed"
fi

# --- 2. daemon ----------------------------------------------------------------
if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
	log "docker daemon is answering"
else
	if pgrep -x dockerd >/dev/null 2>&1; then
		log "dockerd is running but not answering yet; waiting"
	else
		log "starting dockerd (log: $dockerd_log)"
		as_root mkdir -p "$(dirname "$dockerd_log")"
		# nohup + setsid: the daemon must outlive this script and its terminal.
		as_root sh -c 'nohup setsid dockerd >>"$1" 2>&1 </dev/null &' sh "$dockerd_log"
	fi
	deadline=$((SECONDS + dockerd_wait))
	until docker version --format '{{.Server.Version}}' >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			tail -n 20 "$dockerd_log" >&2 || true
			die "dockerd did not answer within ${dockerd_wait}s"
		fi
		sleep 1
	done
	log "docker daemon is answering"
fi
log "engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"

# --- 3. debian:bookworm-slim ----------------------------------------------------
# debian_mirror prints the first Debian archive URI apt is configured with.
debian_mirror() {
	local f=/etc/apt/sources.list.d/debian.sources uri=
	if [ -r "$f" ]; then
		# deb822: "URIs: <uri> [<uri>...]"; skip the security archive.
		uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
	fi
	if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
		# one-line style: "deb [options] <uri> <suite> <components>"
		uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\// && $i !~ /security/) { print $i; exit } }' /etc/apt/sources.list)
	fi
	[ -n "$uri" ] || return 1
	printf '%s\n' "$uri"
}

if docker image inspect "$debian_image" >/dev/null 2>&1; then
	log "$debian_image is present"
else
	mirror=$(debian_mirror) || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
	rootfs=$(mktemp -d /tmp/outpost-bookworm.XXXXXX)
	trap 'as_root rm -rf "$rootfs"' EXIT
	log "building $debian_image with debootstrap from $mirror (a few minutes)"
	as_root debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
	# Keep the image small: no downloaded packages or indexes.
	as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* 2>/dev/null || true
	log "importing $debian_image"
	as_root tar -C "$rootfs" --numeric-owner -c . |
		docker import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$debian_image" >/dev/null
	as_root rm -rf "$rootfs"
	trap - EXIT
	log "$debian_image imported"
fi

# --- 4. Outpost base image ------------------------------------------------------------
if [ "${OUTPOST_REBUILD_BASE:-}" != 1 ] && docker image inspect "$base_image" >/dev/null 2>&1; then
	log "$base_image is present"
else
	log "building $base_image from .outpost/Dockerfile"
	# The Dockerfile alone is the context (stdin): nothing else of .outpost/
	# (.env, conversations) ever reaches the engine. The classic builder is
	# used because it resolves FROM against local images without a registry.
	DOCKER_BUILDKIT=0 docker build --pull=false -t "$base_image" - <"$repo_root/.outpost/Dockerfile" >&2
	log "$base_image built"
fi
log "ready: sandbox image $base_image"
