#!/usr/bin/env bash
# Installs the outpost release binary for this runner, verified against the
# release's SHA256SUMS before it is made executable or put on PATH.
# Inputs (environment): OUTPOST_ACTION_VERSION, OUTPOST_ACTION_REF,
# OUTPOST_ACTION_RELEASE_URL, OUTPOST_ACTION_SHA256, OUTPOST_ACTION_TOKEN;
# GitHub's RUNNER_* and
# GITHUB_* variables. Outputs: version, bin, cli-cache.
set -euo pipefail

fail() {
	echo "::error title=outpost install::$*"
	exit 1
}

if [ -n "${OUTPOST_ACTION_TOKEN:-}" ]; then
	echo "::add-mask::$OUTPOST_ACTION_TOKEN"
fi

# The version: the input, else the ref the action was used at (uses:
# outpost-dev/outpost@v0.9.0), else the last component of the action's path
# (the runner keeps an action at _actions/OWNER/REPO/REF).
version="${OUTPOST_ACTION_VERSION:-}"
from="the version input"
if [ -z "$version" ]; then
	version="${OUTPOST_ACTION_REF:-}"
	from="the action's ref"
fi
if [ -z "$version" ]; then
	version="$(basename "${GITHUB_ACTION_PATH:-}")"
	from="the action's path"
fi
if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	fail "cannot tell which outpost release to install: $from is '$version', not a release tag such as v0.9.0. Use the action at a release tag (uses: outpost-dev/outpost@v0.9.0) or set the version input."
fi

case "${RUNNER_OS:-}" in
Linux) os=linux ;;
macOS) os=darwin ;;
*) fail "outpost releases are built for Linux and macOS runners, not '${RUNNER_OS:-}'" ;;
esac
case "${RUNNER_ARCH:-}" in
X64) arch=amd64 ;;
ARM64) arch=arm64 ;;
*) fail "outpost releases are built for X64 and ARM64 runners, not '${RUNNER_ARCH:-}'" ;;
esac
asset="outpost-$os-$arch"
base="${OUTPOST_ACTION_RELEASE_URL%/}/$version"

dir="${RUNNER_TOOL_CACHE:?}/outpost/$version/$arch"
tmp="$(mktemp -d "${RUNNER_TEMP:?}/outpost-download.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/SHA256SUMS" "$base/SHA256SUMS" || fail "cannot download $base/SHA256SUMS"
curl -fsSL --retry 3 -o "$tmp/$asset" "$base/$asset" || fail "cannot download $base/$asset"

want="$(awk -v f="$asset" '$2 == f || $2 == "*" f { print $1 }' "$tmp/SHA256SUMS")"
if [ -z "$want" ]; then
	fail "SHA256SUMS of $version lists no $asset"
fi
against=SHA256SUMS
if [ -n "${OUTPOST_ACTION_SHA256:-}" ]; then
	# The workflow's own pin: a replaced release (binary and SHA256SUMS
	# both) cannot match it.
	pinned="$(printf '%s\n' "$OUTPOST_ACTION_SHA256" | awk -v f="$asset" '
		NF == 1 && length($1) == 64 && $1 ~ /^[0-9a-fA-F]+$/ { one = $1; n++ }
		NF == 2 && ($2 == f || $2 == "*" f) { print $1; found = 1 }
		END { if (!found && n == 1) print one }')"
	if [ -z "$pinned" ]; then
		fail "the sha256 input lists no $asset (give the release's SHA256SUMS lines, or the one sum of this runner's binary)"
	fi
	if [ "$(printf '%s' "$pinned" | tr 'A-F' 'a-f')" != "$want" ]; then
		fail "checksum mismatch: SHA256SUMS of $version lists $want for $asset, the sha256 input pins $pinned; refusing to run it"
	fi
	against="SHA256SUMS and the sha256 input"
fi
if command -v sha256sum >/dev/null; then
	got="$(sha256sum "$tmp/$asset" | cut -d' ' -f1)"
else
	got="$(shasum -a 256 "$tmp/$asset" | cut -d' ' -f1)"
fi
if [ "$got" != "$want" ]; then
	fail "checksum mismatch: $asset of $version has SHA-256 $got, SHA256SUMS says $want; refusing to run it"
fi
echo "$asset $version: SHA-256 $got matches $against"

mkdir -p "$dir"
install -m 0755 "$tmp/$asset" "$dir/outpost"
echo "$dir" >>"$GITHUB_PATH"

# Where the verified CLIs are cached (the cache step keeps it between runs).
if [ -n "${OUTPOST_CACHE_DIR:-}" ]; then
	cache="$OUTPOST_CACHE_DIR"
elif [ "$os" = darwin ]; then
	cache="$HOME/Library/Caches/outpost"
else
	cache="${XDG_CACHE_HOME:-$HOME/.cache}/outpost"
fi
{
	echo "version=$version"
	echo "bin=$dir/outpost"
	echo "cli-cache=$cache/cli"
} >>"$GITHUB_OUTPUT"
"$dir/outpost" --version
