#!/usr/bin/env bash
# install-clis.sh — install the pinned agent CLIs from npm for the real-CLI tests.
#
# The pins are the agent registry's, printed by `outpost bootstrap --print`
# (built from this checkout with `go run`; Go's build cache makes later runs
# quick): one line per CLI, COMMAND|PACKAGE@VERSION|EXECUTABLE UNDER
# node_modules|VERSION LINE. No version is repeated here.
#
# The registry is whatever the user's npm configuration says (NPM_CONFIG_REGISTRY,
# .npmrc, `npm config get registry`); no registry host is named here. The
# packages are installed into $OUTPOST_CLI_PREFIX (default /opt/outpost-clis)
# and their executables are linked into $OUTPOST_CLI_PREFIX/bin, which the
# caller puts on PATH. Idempotent: a CLI already at its pinned version is kept
# and npm is not run. (`outpost bootstrap` itself fetches the same pins and
# checks their SHA-512; this script gives the tests the CLIs as npm installs
# them.)
#
# --print prints the pins it would install and installs nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${OUTPOST_CLI_PREFIX:-/opt/outpost-clis}
bin="$prefix/bin"
log() { printf 'install-clis: %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || { log "go is required (the pins come from outpost bootstrap --print)"; exit 1; }
pins_out=$(cd "$root" && go run ./cmd/outpost bootstrap --print) || { log "outpost bootstrap --print failed"; exit 1; }
mapfile -t pins <<<"$pins_out"
[ "${#pins[@]}" -gt 0 ] && [ -n "${pins[0]}" ] || { log "outpost bootstrap --print printed no pins"; exit 1; }
if [ "${1:-}" = "--print" ]; then
	printf '%s\n' "${pins[@]}"
	exit 0
fi

command -v npm >/dev/null 2>&1 || { log "npm is required"; exit 1; }
mkdir -p "$bin"
missing=()
for row in "${pins[@]}"; do
	IFS='|' read -r name pkg path want <<<"$row"
	if [ -x "$bin/$name" ] && "$bin/$name" --version 2>/dev/null | grep -qF "$want"; then
		log "$name already at $want"
	else
		missing+=("$pkg")
	fi
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "npm install ${missing[*]} (registry from npm configuration)"
	npm install --no-save --no-audit --no-fund --prefix "$prefix" "${missing[@]}" >&2
fi
for row in "${pins[@]}"; do
	IFS='|' read -r name pkg path want <<<"$row"
	target="$prefix/node_modules/$path"
	[ -e "$target" ] || { log "missing $target after install"; exit 1; }
	ln -sf "$target" "$bin/$name"
	got=$("$bin/$name" --version 2>/dev/null | head -n 1)
	case "$got" in
	*"$want"*) log "$name: $got" ;;
	*) log "$name reports '$got', want '$want'"; exit 1 ;;
	esac
done
echo "$bin"
