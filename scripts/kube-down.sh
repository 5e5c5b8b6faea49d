#!/usr/bin/env bash
# kube-down.sh — stop the cluster scripts/kube-setup.sh started.
#
# Usage: bash scripts/kube-down.sh [--purge]
#
# Stops the kubelet, the pods' containers, the control plane, the private
# containerd and etcd (each by its recorded pid, and only if that pid still
# runs the binary this setup started), unmounts what the pods left, removes
# the pod bridge and the kubelet's empty cgroups. The state directory
# (certificates, etcd data, imported images) is kept, so the next
# kube-setup.sh is fast; --purge removes it too. The cached binaries
# (${OUTPOST_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outpost/kubernetes/VERSION})
# are never removed. Idempotent: running it with nothing up does nothing.
set -uo pipefail

log() { printf 'kube-down: %s\n' "$*" >&2; }

purge=0
case "${1:-}" in
--purge) purge=1 ;;
"") ;;
*) log "usage: kube-down.sh [--purge]"; exit 2 ;;
esac

KUBE_VERSION=v1.37.2
cache=${OUTPOST_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outpost/kubernetes/$KUBE_VERSION}
state=${OUTPOST_KUBE_STATE:-/var/lib/outpost-kube}
run=${OUTPOST_KUBE_RUN:-/run/outpost-kube}
bin=$cache/bin
sock=$run/containerd.sock

[ "$(id -u)" -eq 0 ] || { log "error: run as root"; exit 1; }

# stop NAME: TERM the process group recorded in $run/NAME.pid, wait up to
# 10 s, then KILL. A pid that no longer runs our binary is not touched.
stop() {
	local f=$run/$1.pid pid exe want
	[ -f "$f" ] || return 0
	pid=$(cat "$f" 2>/dev/null)
	case "$1" in
	containerd) want=$(command -v containerd) ;;
	*) want=$bin/$1 ;;
	esac
	if [[ "$pid" =~ ^[0-9]+$ ]] && exe=$(readlink "/proc/$pid/exe" 2>/dev/null) && [ "$exe" = "$want" ]; then
		log "stopping $1 (pid $pid)"
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

stop kubelet
# The pods' containers and sandboxes, through our containerd.
if [ -S "$sock" ] && timeout 5 ctr -a "$sock" version >/dev/null 2>&1; then
	tasks=$(timeout 10 ctr -a "$sock" -n k8s.io tasks ls -q </dev/null 2>/dev/null)
	for c in $tasks; do timeout 10 ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$c" </dev/null >/dev/null 2>&1; done
	[ -n "$tasks" ] && sleep 1
	for c in $tasks; do timeout 10 ctr -a "$sock" -n k8s.io tasks delete -f "$c" </dev/null >/dev/null 2>&1; done
	for c in $(timeout 10 ctr -a "$sock" -n k8s.io containers ls -q </dev/null 2>/dev/null); do
		timeout 10 ctr -a "$sock" -n k8s.io containers delete "$c" </dev/null >/dev/null 2>&1
	done
fi
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop containerd
stop etcd
# Shims of our containerd (their command line names our socket).
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
# Mounts the pods left (network namespaces, volumes, rootfs), deepest first.
awk -v s="$state" -v r="$run" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
	while read -r m; do umount -l "$m" 2>/dev/null; done
ip link del outpostkube0 2>/dev/null
# The kubelet's cgroups (only empty ones can go).
for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
done
rm -rf "$run"
if [ "$purge" = 1 ]; then
	log "removing $state"
	rm -rf "$state"
fi
log "down"
