#!/usr/bin/env bash
# install-clis.sh — install the pinned agent CLIs from npm for the real-CLI tests.
#
# The registry is whatever the user's npm configuration says (NPM_CONFIG_REGISTRY,
# .npmrc, `npm config get registry`); no registry host is named here. The
# packages are installed into $OUTPOST_CLI_PREFIX (default /opt/outpost-clis)
# and their native binaries are linked into $OUTPOST_CLI_PREFIX/bin, which the
# caller puts on PATH. Idempotent: a CLI already at its pinned version is kept.
#
# Until `outpost bootstrap` (verified, cached installs) lands, this is how CI
# and developers get the real binaries.
set -euo pipefail

prefix=${OUTPOST_CLI_PREFIX:-/opt/outpost-clis}
bin="$prefix/bin"
log() { printf 'install-clis: %s\n' "$*" >&2; }

# name|npm package@version|native binary inside node_modules|expected --version prefix
pins=(
	"claude|@anthropic-ai/claude-code@2.1.328|@anthropic-ai/claude-code-linux-x64/claude|2.1.328"
	"codex|@openai/codex@0.169.0|.bin/codex|codex-cli 0.169.0"
	"copilot|@github/copilot@1.0.102|@github/copilot-linux-x64/copilot|GitHub Copilot CLI 1.0.102"
)

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
