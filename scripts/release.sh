#!/usr/bin/env bash
# release.sh VERSION OUTDIR — build the release binaries of outpost and their
# checksums.
#
# Writes OUTDIR/outpost-<os>-<arch> for linux and darwin on amd64 and arm64
# (static: CGO_ENABLED=0; reproducible: -trimpath, -buildvcs=false, no build
# id, the version and commit stamped by the linker) and OUTDIR/SHA256SUMS in
# sha256sum's format. The same source, VERSION and Go toolchain give the same
# bytes. Nothing is fetched when the module cache holds the dependencies
# (go mod download once; GOPROXY=off proves it).
#
# VERSION (like v0.9.0) must equal the version declared in
# internal/version/version.go: a release bumps that constant, commits, tags
# the commit VERSION, then runs this script.
#
# OUTPOST_RELEASE_PLATFORMS (space- or comma-separated os/arch, default all
# four) builds a subset.
set -euo pipefail

die() { printf 'release: %s\n' "$*" >&2; exit 2; }

[ "$#" -eq 2 ] || die "usage: scripts/release.sh VERSION OUTDIR (VERSION like v0.9.0)"
version=$1
outdir=$2
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	die "VERSION $version is not a version like v0.9.0"
declared=$(sed -n 's/^const Declared = "\(.*\)"$/\1/p' "$repo_root/internal/version/version.go")
[ -n "$declared" ] || die "no version declared in internal/version/version.go (const Declared)"
[ "$version" = "$declared" ] ||
	die "VERSION $version differs from the version the source declares ($declared in internal/version/version.go): bump the constant, commit and tag, or release $declared"

platforms=${OUTPOST_RELEASE_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
platforms=${platforms//,/ }

commit=unknown
if git -C "$repo_root" rev-parse --verify -q HEAD >/dev/null 2>&1; then
	commit=$(git -C "$repo_root" rev-parse HEAD)
	if [ -n "$(git -C "$repo_root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		commit+=-dirty
	fi
fi

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
pkg=github.com/outpost-dev/outpost/internal/version
ldflags="-s -w -buildid= -X $pkg.version=$version -X $pkg.commit=$commit"

names=()
for p in $platforms; do
	os=${p%/*}
	arch=${p#*/}
	case "$os/$arch" in
	linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64) ;;
	*) die "platform $p is not released (linux/amd64, linux/arm64, darwin/amd64, darwin/arm64)" ;;
	esac
	name=outpost-$os-$arch
	printf 'release: %s %s\n' "$name" "$version" >&2
	# GOAMD64 and GOARM64 at their defaults: one from the environment (or go
	# env -w) would change the bytes and make a binary older CPUs refuse.
	(cd "$repo_root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
		go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$outdir/$name" ./cmd/outpost)
	names+=("$name")
done
[ "${#names[@]}" -gt 0 ] || die "OUTPOST_RELEASE_PLATFORMS names no platform"

if command -v sha256sum >/dev/null 2>&1; then
	sum=(sha256sum)
else
	sum=(shasum -a 256)
fi
(cd "$outdir" && "${sum[@]}" "${names[@]}" >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
printf 'release: %s\n' "$outdir/SHA256SUMS" >&2
