#!/usr/bin/env bash
# Makes the sandbox image available: the runner's own copy when it has one;
# else a named image is pulled, and the default image (outpost/base:dev) is
# built from the trusted directory's .outpost/Dockerfile, or from Outpost's
# recipe (written by outpost init) when there is none.
# Inputs (environment): OUTPOST_ACTION_SANDBOX, OUTPOST_ACTION_IMAGE,
# OUTPOST_ACTION_DIR. Output: image (empty: outpost's default).
set -euo pipefail

image="${OUTPOST_ACTION_IMAGE:-}"
echo "image=$image" >>"$GITHUB_OUTPUT"
case "${OUTPOST_ACTION_SANDBOX:-docker}" in
docker) ;;
*)
	echo "sandbox ${OUTPOST_ACTION_SANDBOX}: no image to prepare"
	exit 0
	;;
esac
tag="${image:-outpost/base:dev}"
if docker image inspect "$tag" >/dev/null 2>&1; then
	echo "using the runner's $tag"
	exit 0
fi
if [ -n "$image" ]; then
	docker pull "$image"
	exit 0
fi
recipe="${OUTPOST_ACTION_DIR:-}/.outpost"
if [ -z "${OUTPOST_ACTION_DIR:-}" ] || [ ! -f "$recipe/Dockerfile" ]; then
	recipe="$RUNNER_TEMP/outpost-recipe/.outpost"
	outpost init --dir "$RUNNER_TEMP/outpost-recipe" >/dev/null
fi
outpost image build --dir "$recipe" --tag "$tag"
