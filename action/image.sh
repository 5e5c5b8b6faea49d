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
# The recipe is the trusted directory's (never the workspace's, which the
# pull request controls: run.sh refuses it too, but only after this step).
recipe=""
if [ -n "${OUTPOST_ACTION_DIR:-}" ]; then
	ws="$(cd "${GITHUB_WORKSPACE:?}" && pwd -P)"
	trusted="$(cd "$OUTPOST_ACTION_DIR" && pwd -P)" || {
		echo "::error title=outpost::working-directory '$OUTPOST_ACTION_DIR' does not exist"
		exit 1
	}
	case "$trusted/" in
	"$ws"/*)
		echo "::error title=outpost::working-directory '$OUTPOST_ACTION_DIR' is inside the workspace, which the pull request controls: check the trusted configuration out elsewhere (see the README's CI section)"
		exit 1
		;;
	esac
	recipe="$OUTPOST_ACTION_DIR/.outpost"
fi
if [ -z "$recipe" ] || [ ! -f "$recipe/Dockerfile" ]; then
	recipe="$RUNNER_TEMP/outpost-recipe/.outpost"
	# outpost reads the configuration (drivers) of the directory it runs in:
	# never the workspace's.
	mkdir -p "$RUNNER_TEMP/outpost-recipe"
	(cd "$RUNNER_TEMP/outpost-recipe" && outpost init --dir "$RUNNER_TEMP/outpost-recipe" >/dev/null)
fi
outpost image build --dir "$recipe" --tag "$tag"
