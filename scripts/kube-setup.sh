#!/usr/bin/env bash
# kube-setup.sh — a single-node Kubernetes cluster on this machine, loopback only,
# for Outpost's kubernetes sandboxes (package sandbox/kubernetes) and its tests.
#
# Usage: bash scripts/kube-setup.sh [--build-only]
#
# Prints the kubeconfig path on stdout (everything else goes to stderr), so
#   export OUTPOST_KUBECONFIG=$(bash scripts/kube-setup.sh)
# makes the Kubernetes tests run. Stop the cluster with scripts/kube-down.sh.
#
# Idempotent; used by CI (.ci/run) and by developers. Each step is skipped when
# its result is already there:
#
#   1. Debian packages: containerd and runc (they come with docker.io),
#      containernetworking-plugins, openssl, curl, iproute2 (apt-get);
#   2. Kubernetes $KUBE_VERSION (kube-apiserver, kube-controller-manager,
#      kube-scheduler, kubelet, kubectl) and etcd are built from the Go module
#      proxy ONCE and cached outside the checkout in
#      ${OUTPOST_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outpost/kubernetes/$KUBE_VERSION}
#      (~9 min on 2 cores the first time, +4.7 GB Go build cache; a warm machine
#      never rebuilds). --build-only stops after this step;
#   3. the cluster is started unless it is already up and healthy: etcd, a
#      private containerd with CRI (its own root, state and socket; the Docker
#      engine's containerd is left alone), kube-apiserver, controller-manager,
#      scheduler and a kubelet, every one bound to 127.0.0.1; the kubelet
#      limits every pod to 1024 processes and threads (podPidsLimit). A cluster
#      that is up is reused: only a changed kubelet configuration (written
#      by an older version of this script) restarts the kubelet, whose pods
#      keep running. Processes left
#      over from an earlier run (stale pid files, half-started cluster, a
#      reboot) are stopped first; certificates, etcd data and imported images
#      are kept in the state directory and reused;
#   4. a tiny pause image is built locally (no registry is ever contacted) and
#      the sandbox images are copied from Docker into the cluster's containerd
#      ($OUTPOST_KUBE_IMAGES, default "outpost/base:dev debian:bookworm-slim";
#      run scripts/docker-setup.sh first). An image is imported again when
#      Docker's copy changed.
#
# Paths: state in ${OUTPOST_KUBE_STATE:-/var/lib/outpost-kube} (the admin
# kubeconfig is $OUTPOST_KUBE_STATE/admin.kubeconfig, mode 0600), sockets and
# pid files in ${OUTPOST_KUBE_RUN:-/run/outpost-kube}, logs in
# $OUTPOST_KUBE_STATE/log. The node is named "localhost"; there is no
# kube-proxy and no DNS, and pods cannot reach the API server. A pod that must
# reach a server on this machine's loopback uses host networking.
#
# Needs root (containerd and the kubelet manage mounts, cgroups and network).
set -euo pipefail

KUBE_VERSION=v1.37.2     # pinned; the staging modules are published as v0.37.2
KUBE_STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.7.0      # go.etcd.io/etcd/server/v3, the version Kubernetes $KUBE_VERSION requires

log() { printf 'kube-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

build_only=0
case "${1:-}" in
--build-only) build_only=1 ;;
"") ;;
*) die "usage: kube-setup.sh [--build-only]" ;;
esac

export PATH="/usr/local/go/bin:$PATH"
cache=${OUTPOST_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outpost/kubernetes/$KUBE_VERSION}
state=${OUTPOST_KUBE_STATE:-/var/lib/outpost-kube}
run=${OUTPOST_KUBE_RUN:-/run/outpost-kube}
images=${OUTPOST_KUBE_IMAGES:-outpost/base:dev debian:bookworm-slim}
bin=$cache/bin
sock=$run/containerd.sock
pki=$state/pki
kubeconfig=$state/admin.kubeconfig
node=localhost # resolves to 127.0.0.1; the API server reaches the kubelet by this name
# The sandbox (pause) image: built here, never pulled. A short name; containerd
# normalizes it the same way for the import and for the CRI lookup.
pause_image=outpost/pause:3.10
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)

[ "$(id -u)" -eq 0 ] || die "run as root: the cluster's containerd and kubelet manage mounts, cgroups and network"

# --- 1. packages ---------------------------------------------------------------
need=()
command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v go >/dev/null 2>&1 || die "go is not on PATH (expected in /usr/local/go/bin)"
if [ "${#need[@]}" -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
else
	log "containerd, runc, CNI plugins, openssl, curl and iproute2 are installed"
fi

# --- 2. binaries, built once per version ------------------------------------------
# The build module lives in the cache, never in the checkout, so it is no part of
# Outpost's module. It requires k8s.io/kubernetes and replaces each staging module
# (k8s.io/kubernetes's own replace lines point into its repository) with the
# published release of the same Kubernetes version.
build_binaries() {
	local src=$cache/src gomod tmp
	log "building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION from the Go module proxy (once; ~9 min on 2 cores)"
	rm -rf "$src"
	mkdir -p "$src/etcd" "$src/pause"
	export GOWORK=off GOFLAGS=-buildvcs=false
	gomod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	[ -f "$gomod" ] || die "could not download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"
	{
		echo "module outpost.local/kubebuild"
		echo
		echo "go 1.26.0"
		echo
		echo "require ("
		echo "	k8s.io/kubernetes $KUBE_VERSION"
		echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
		echo ")"
		echo
		echo "replace ("
		sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9.-]*\) => \./staging/src/k8s\.io/[a-z0-9.-]*$|	\1 => \1 '"$KUBE_STAGING_VERSION"'|p' "$gomod"
		echo ")"
	} >"$src/go.mod"
	grep -q 'k8s.io/client-go => k8s.io/client-go' "$src/go.mod" || die "found no staging replacements in $gomod"
	cat >"$src/etcd/main.go" <<-'EOF'
		// Command etcd is etcd's own main, built from go.etcd.io/etcd/server/v3.
		package main

		import (
			"os"

			"go.etcd.io/etcd/server/v3/etcdmain"
		)

		func main() { etcdmain.Main(os.Args) }
	EOF
	cat >"$src/pause/main.go" <<-'EOF'
		// Command pause is a pod's sandbox process: it waits for SIGTERM or
		// SIGINT and reaps the orphans it inherits as the pod's init.
		package main

		import (
			"os"
			"os/signal"
			"syscall"
		)

		func main() {
			ch := make(chan os.Signal, 16)
			signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			for sig := range ch {
				if sig != syscall.SIGCHLD {
					os.Exit(0)
				}
				var status syscall.WaitStatus
				for {
					pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
					if pid <= 0 || err != nil {
						break
					}
				}
			}
		}
	EOF
	local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
	ld="$ld -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	ld="$ld -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	tmp=$cache/bin.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	(
		cd "$src"
		nice -n 19 go build -mod=mod -trimpath -ldflags "$ld" -o "$tmp/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
			k8s.io/kubernetes/cmd/kubectl ./etcd
		CGO_ENABLED=0 nice -n 19 go build -mod=mod -trimpath -ldflags "-s -w" -o "$tmp/pause" ./pause
	) >&2
	echo "$KUBE_VERSION etcd $ETCD_VERSION" >"$tmp/VERSION"
	rm -rf "$bin"
	mv "$tmp" "$bin"
	log "binaries cached in $bin"
}

if [ -f "$bin/VERSION" ] && [ "$(cat "$bin/VERSION")" = "$KUBE_VERSION etcd $ETCD_VERSION" ]; then
	log "Kubernetes $KUBE_VERSION binaries are cached in $bin"
else
	build_binaries
fi
[ "$build_only" = 1 ] && exit 0
kubectl=$bin/kubectl

# --- 3. the cluster ----------------------------------------------------------------
# pid_of NAME prints the pid recorded for NAME if that process is alive and
# still runs our binary (a pid file that survived a reboot may name another
# process by now).
pid_of() {
	local f=$run/$1.pid pid exe
	[ -f "$f" ] || return 1
	pid=$(cat "$f" 2>/dev/null) || return 1
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	case "$1" in
	containerd) [ "$exe" = "$(command -v containerd)" ] || return 1 ;;
	*) [ "$exe" = "$bin/$1" ] || return 1 ;;
	esac
	echo "$pid"
}

api_ready() { curl -sf --max-time 3 --cacert "$pki/ca.crt" https://127.0.0.1:6443/readyz >/dev/null 2>&1; }

node_ready() {
	[ "$(timeout 10 "$kubectl" --kubeconfig "$kubeconfig" get node "$node" \
		-o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' </dev/null 2>/dev/null)" = True ]
}

cluster_up() {
	local c
	for c in containerd "${components[@]}"; do pid_of "$c" >/dev/null || return 1; done
	[ -f "$kubeconfig" ] && api_ready && curl -sf --max-time 2 http://127.0.0.1:10248/healthz >/dev/null && node_ready
}

# waitfor SECONDS WHAT CMD...: poll CMD until it succeeds; on timeout show the log of WHAT.
waitfor() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			[ -f "$state/log/$what.log" ] && tail -n 20 "$state/log/$what.log" >&2
			die "$what is not ready after ${SECONDS}s (log: $state/log/$what.log)"
		fi
		sleep 0.2
	done
}

# start NAME CMD...: run in its own session, logging to $state/log/NAME.log.
start() {
	local name=$1
	shift
	setsid "$@" >>"$state/log/$name.log" 2>&1 </dev/null &
	echo $! >"$run/$name.pid"
}

# leaf NAME SUBJECT EXTENDED-KEY-USAGE [SUBJECT-ALT-NAMES]: a certificate of the
# cluster's CA in $pki/NAME.crt (key $pki/NAME.key).
leaf() {
	local ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$3"
	[ -n "${4:-}" ] && ext="$ext
subjectAltName=$4"
	openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -subj "$2" 2>/dev/null |
		openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
			-extfile <(printf '%s\n' "$ext") -out "$pki/$1.crt" 2>/dev/null
	chmod 0600 "$pki/$1.key"
}

write_certificates() {
	mkdir -p "$pki"
	chmod 0700 "$pki"
	log "creating certificates in $pki"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 3650 \
		-subj "/CN=outpost-kube-ca" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
	leaf apiserver /CN=kube-apiserver serverAuth \
		"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
	leaf apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	leaf admin "/O=system:masters/CN=outpost-admin" clientAuth
	leaf kubelet-client "/O=system:nodes/CN=system:node:$node" clientAuth
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	chmod 0600 "$pki"/*.key
}

# write_kubeconfig FILE USER CERT
write_kubeconfig() {
	(
		umask 077
		cat >"$1" <<-EOF
			apiVersion: v1
			kind: Config
			clusters:
			- name: outpost-local
			  cluster:
			    server: https://127.0.0.1:6443
			    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
			users:
			- name: $2
			  user:
			    client-certificate-data: $(base64 -w0 "$pki/$3.crt")
			    client-key-data: $(base64 -w0 "$pki/$3.key")
			contexts:
			- name: outpost-local
			  context: {cluster: outpost-local, user: $2, namespace: default}
			current-context: outpost-local
		EOF
	)
}

# import_images copies the pause image and each sandbox image from Docker into
# the cluster's containerd when it is missing there or Docker's copy changed.
import_images() {
	local img id stamp have
	if ! docker image inspect "$pause_image" >/dev/null 2>&1; then
		local ctx out
		ctx=$(mktemp -d)
		cp "$bin/pause" "$ctx/pause"
		printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
		out=$(DOCKER_BUILDKIT=0 docker build -q -t "$pause_image" "$ctx" 2>&1) || { printf '%s\n' "$out" >&2; die "could not build $pause_image"; }
		rm -rf "$ctx"
	fi
	mkdir -p "$state/images"
	# (Not "ctr ... | grep -q": with pipefail, grep's early exit fails ctr.)
	have=$(timeout 30 ctr -a "$sock" -n k8s.io images ls -q </dev/null)
	for img in "$pause_image" $images; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) ||
			die "image $img is not in Docker (run scripts/docker-setup.sh first)"
		stamp=$state/images/$(printf '%s' "$img" | tr '/:' '__').id
		if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$id" ] && grep -q "/${img##*/}\$" <<<"$have"; then
			continue
		fi
		log "importing $img into the cluster's containerd"
		docker save "$img" | timeout 300 ctr -a "$sock" -n k8s.io images import - >/dev/null
		echo "$id" >"$stamp"
	done
}

# kubelet: cgroupfs (no systemd), cgroup v1 allowed, oom_score_adj left at 0
# (see the containerd configuration), every pod limited to $pod_pids_limit
# processes and threads (podPidsLimit: Kubernetes has no per-container pids
# limit; this is Outpost's default, as for its Docker leases), and a serving
# certificate of the cluster's CA, so a client on this machine can read the
# kubelet's configuration (/configz) directly and verify whom it talks to:
# the API server refuses to proxy to a node on the loopback ("address not
# allowed"), and Outpost checks the pod pids limit there.
pod_pids_limit=1024
# write_kubelet_config writes $state/kubelet.yaml and succeeds when its
# content changed (a running kubelet must then be restarted to apply it).
write_kubelet_config() {
	local f=$state/kubelet.yaml
	[ -f "$pki/kubelet-serving.crt" ] && [ -f "$pki/kubelet-serving.key" ] ||
		leaf kubelet-serving "/CN=$node" serverAuth "DNS:localhost,IP:127.0.0.1"
	cat >"$f.new" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: "$pki/kubelet-serving.crt"
tlsPrivateKeyFile: "$pki/kubelet-serving.key"
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
podPidsLimit: $pod_pids_limit
rotateCertificates: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
EOF
	if [ -f "$f" ] && cmp -s "$f" "$f.new"; then
		rm -f "$f.new"
		return 1
	fi
	mv "$f.new" "$f"
}

# The kubelet's own health first: after a restart the node object still says
# Ready from before.
kubelet_healthy() { curl -sf --max-time 2 http://127.0.0.1:10248/healthz >/dev/null; }
kubelet_down() { ! kubelet_healthy; }

start_kubelet() {
	log "starting kubelet (node $node)"
	start kubelet "$bin/kubelet" --config="$state/kubelet.yaml" --kubeconfig="$state/kubelet.kubeconfig" \
		--root-dir="$state/kubelet" --cert-dir="$state/kubelet/pki" --hostname-override="$node" --v=1
	waitfor 120 kubelet kubelet_healthy
	waitfor 120 kubelet node_ready
}

# restart_kubelet stops the running kubelet (its pods keep running: their
# containers belong to containerd) and starts it with the new configuration.
restart_kubelet() {
	local pid
	if pid=$(pid_of kubelet); then
		log "restarting kubelet (pid $pid) to apply the changed $state/kubelet.yaml"
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	waitfor 30 kubelet kubelet_down
	start_kubelet
}

if cluster_up; then
	log "cluster is up (node $node Ready)"
	if write_kubelet_config; then
		restart_kubelet
	else
		log "kubelet configuration unchanged (podPidsLimit $pod_pids_limit)"
	fi
	import_images
	log "ready: kubeconfig $kubeconfig"
	echo "$kubeconfig"
	exit 0
fi

for c in containerd "${components[@]}"; do
	if [ -f "$run/$c.pid" ]; then
		log "stopping what an earlier run left (stale pid files or a half-started cluster)"
		bash "$(dirname "${BASH_SOURCE[0]}")/kube-down.sh" >&2
		break
	fi
done
for port in 6443 23790 23800 10250 10248 10257 10259; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "127.0.0.1:$port is in use by a process this script did not start; stop it first"
	fi
done

t0=$SECONDS
mkdir -p "$state"/{log,etcd,containerd,kubelet,cni/net.d,cni/ipam} "$run"
chmod 0700 "$state"
[ -f "$pki/ca.crt" ] && [ -f "$pki/sa.key" ] && [ -f "$pki/admin.crt" ] || write_certificates
write_kubeconfig "$kubeconfig" outpost-admin admin
write_kubeconfig "$state/kubelet.kubeconfig" "system:node:$node" kubelet-client

log "starting etcd"
start etcd "$bin/etcd" --name outpost --data-dir "$state/etcd" \
	--listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
	--listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
	--initial-cluster outpost=http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810 \
	--quota-backend-bytes 1073741824 --log-level warn

# containerd: a separate instance with the CRI plugin, its own root, state and socket.
cat >"$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$sock"
[ttrpc]
  address = ""
[debug]
  address = ""
  level = "warn"
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$state/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$pause_image"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    # Root may lack CAP_SYS_RESOURCE (as in this kind of VM): then nothing can set
    # oom_score_adj below 0, and the CRI default for sandboxes (-998) kills runc init.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$run/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$state/cni/net.d"
EOF
# The pod network is a bridge inside this machine: no gateway, no masquerade.
cat >"$state/cni/net.d/10-outpost.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "outpost",
  "plugins": [
    {"type": "bridge", "bridge": "outpostkube0", "isGateway": false, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$state/cni/ipam"}}
  ]
}
EOF
log "starting containerd (socket $sock)"
start containerd containerd --config "$state/containerd.toml"
waitfor 30 containerd ctr -a "$sock" version
import_images

waitfor 30 etcd curl -sf --max-time 2 http://127.0.0.1:23790/health
log "starting kube-apiserver"
start kube-apiserver "$bin/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:23790 \
	--bind-address=127.0.0.1 --secure-port=6443 \
	--service-cluster-ip-range=10.96.0.0/24 \
	--client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types=Hostname,InternalIP \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--allow-privileged=false --profiling=false --v=1
waitfor 90 kube-apiserver api_ready

log "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$bin/kube-controller-manager" \
	--kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false \
	--root-ca-file="$pki/ca.crt" --service-account-private-key-file="$pki/sa.key" \
	--cluster-name=outpost-local --profiling=false --v=1
start kube-scheduler "$bin/kube-scheduler" \
	--kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1

sa_ready() { timeout 10 "$kubectl" --kubeconfig "$kubeconfig" get serviceaccount default -n default </dev/null; }
waitfor 60 kube-controller-manager sa_ready
write_kubelet_config || true
start_kubelet
log "cluster is up in $((SECONDS - t0))s (node $node Ready)"
log "ready: kubeconfig $kubeconfig"
echo "$kubeconfig"
