#!/usr/bin/env bash
# Runs one turn (OUTPOST_ACTION_PROMPT) or a batch (OUTPOST_ACTION_JOBS) from
# the trusted directory against $GITHUB_WORKSPACE, recording it for the report,
# and writes what the agent changed in the workspace as a patch. Never fails on
# the agent's failure: the exit code is an output, reported by the next steps.
# Outputs: exit-code, report-dir.
set -euo pipefail

fail() {
	echo "::error title=outpost::$*"
	exit 1
}

ws="$(cd "${GITHUB_WORKSPACE:?}" && pwd -P)"
out="$RUNNER_TEMP/outpost-report"
rm -rf "$out"
mkdir -p "$out"
export OUTPOST_STATE_DIR="${OUTPOST_STATE_DIR:-$RUNNER_TEMP/outpost-state}"

# The trusted directory: outpost reads the project configuration (.outpost/)
# of the directory it runs in, so it never runs in the pull request's checkout.
if [ -n "${OUTPOST_ACTION_DIR:-}" ]; then
	trusted="$(cd "$OUTPOST_ACTION_DIR" && pwd -P)" || fail "working-directory '$OUTPOST_ACTION_DIR' does not exist"
	case "$trusted/" in
	"$ws"/*) fail "working-directory '$OUTPOST_ACTION_DIR' is inside the workspace, which the pull request controls: check the trusted configuration out elsewhere (see the README's CI section)" ;;
	esac
else
	trusted="$RUNNER_TEMP/outpost-project"
	mkdir -p "$trusted"
fi

if [ -n "${OUTPOST_ACTION_PROMPT:-}" ] && [ -n "${OUTPOST_ACTION_JOBS:-}" ]; then
	fail "give the prompt input or the jobs input, not both"
fi
if [ -z "${OUTPOST_ACTION_PROMPT:-}" ] && [ -z "${OUTPOST_ACTION_JOBS:-}" ]; then
	fail "give the prompt input (one turn) or the jobs input (a batch)"
fi

args=(--agent "${OUTPOST_ACTION_AGENT:?the agent input is required}" --auth "$OUTPOST_ACTION_AUTH"
	--credentials "$OUTPOST_ACTION_CREDENTIALS" --timeout "$OUTPOST_ACTION_TIMEOUT"
	--sandbox "$OUTPOST_ACTION_SANDBOX" --workspace "$ws" --out "$out/run")
if [ -n "${OUTPOST_ACTION_IMAGE:-}" ]; then
	args+=(--image "$OUTPOST_ACTION_IMAGE")
fi
if [ -n "${OUTPOST_ACTION_MAX_COST:-}" ]; then
	args+=(--max-cost-usd "$OUTPOST_ACTION_MAX_COST")
fi
# -d '': every line (read stops at the first newline otherwise, dropping the
# flags of the lines after it); read then ends at EOF with status 1.
read -r -d '' -a extra <<<"${OUTPOST_ACTION_ARGS:-}" || true
# (The + form: bash 3.2, macOS's, calls an empty array unbound under set -u.)
args+=(${extra[@]+"${extra[@]}"})

# What the agent changed, measured with a private git directory (so nothing
# the agent writes in the workspace's .git — hooks, filters, fsmonitor —
# ever runs here) and no user or system configuration.
snap="$RUNNER_TEMP/outpost-snapshot.git"
rm -rf "$snap"
snapgit() {
	GIT_DIR="$snap" GIT_WORK_TREE="$ws" GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 \
		git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false "$@"
}
snapgit init -q
snapgit add -A
snapgit -c user.name=outpost -c user.email=outpost@localhost commit -q --allow-empty --no-verify -m before

# The agent's output is not trusted: stop workflow commands while it prints.
stop="outpost-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
echo "::stop-commands::$stop"
cd "$trusted"
set +e
if [ -n "${OUTPOST_ACTION_JOBS:-}" ]; then
	outpost batch "$OUTPOST_ACTION_JOBS" --results "$out/results.jsonl" --allow-path "$ws" "${args[@]}"
else
	printf '%s' "$OUTPOST_ACTION_PROMPT" | outpost run "${args[@]}" -
fi
code=$?
set -e
echo "::$stop::"

snapgit add -A
snapgit diff --cached --binary --no-ext-diff --no-textconv HEAD >"$out/patch.diff"
rm -rf "$snap"
{
	echo "exit-code=$code"
	echo "report-dir=$out"
} >>"$GITHUB_OUTPUT"
