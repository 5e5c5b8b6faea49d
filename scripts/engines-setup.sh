#!/usr/bin/env bash
# engines-setup.sh — make this machine ready for Outpost's tests against
# Docker-compatible engines that are not the local dockerd: Podman's
# Docker-compatible API service, and the local dockerd reached as a remote
# engine over ssh (DOCKER_HOST=ssh://…).
#
# Idempotent; used by CI (.ci/run) and by developers, after
# scripts/docker-setup.sh (the images come from the Docker engine). Each step
# is skipped when its result is already there:
#
#   1. podman, catatonit (Podman's --init) and openssh-server are installed
#      (apt-get);
#   2. Podman's container defaults get this machine's resource limits
#      (a containers.conf drop-in): rootful Podman raises nofile/nproc to
#      values a process without CAP_SYS_RESOURCE may not set, and every
#      container start then fails with "error setting rlimit";
#   3. the Podman API service answers on unix:///run/podman/podman.sock
#      (started in the background if not, in $OUTPOST_ENGINES_DIR/podman,
#      logging to $OUTPOST_PODMAN_LOG);
#   4. the sandbox image (default outpost/base:dev) is in Podman's storage,
#      loaded with `docker save | podman load` when missing or different
#      from Docker's;
#   5. an sshd for tests listens on 127.0.0.1:$OUTPOST_SSH_PORT (default
#      2222) only, with its own configuration, host key and a generated
#      client key under $OUTPOST_ENGINES_DIR (default /var/lib/outpost-engines,
#      outside the checkout). Its only user, outpost-remote, may log in with
#      that key alone and is in the docker group, so `docker system
#      dial-stdio` (run by Docker's ssh connection helper) reaches dockerd.
#
# At the end it prints the variables the tests read, as `export` lines:
#   eval "$(bash scripts/engines-setup.sh)"
#
# Everything listens on loopback only. Needs root.
set -euo pipefail

log() { printf 'engines-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages, starts services)"

state=${OUTPOST_ENGINES_DIR:-/var/lib/outpost-engines}
image=${OUTPOST_BASE_IMAGE:-outpost/base:dev}
podman_sock=/run/podman/podman.sock
podman_log=${OUTPOST_PODMAN_LOG:-/var/log/outpost-podman.log}
ssh_port=${OUTPOST_SSH_PORT:-2222}
ssh_user=outpost-remote
wait_s=${OUTPOST_ENGINES_WAIT:-60}

# --- 1. packages -----------------------------------------------------------------
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
[ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || need+=(catatonit)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
if [ "${#need[@]}" -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update >&2
	# The package's own sshd service is not wanted: policy-rc.d keeps
	# maintainer scripts from starting it where an init system would.
	own_policy=0
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		own_policy=1
	fi
	status=0
	DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >&2 || status=$?
	[ "$own_policy" = 0 ] || rm -f /usr/sbin/policy-rc.d
	[ "$status" = 0 ] || die "apt-get install ${need[*]} failed"
else
	log "podman, catatonit and openssh-server are installed"
fi

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "the Docker engine does not answer: run scripts/docker-setup.sh first"

# --- 2 and 3. Podman API service and its container limits ------------------------------
podman_ok() { curl -fsS --max-time 5 --unix-socket "$podman_sock" http://podman/_ping >/dev/null 2>&1; }
service_pid() { pgrep -o -f "^podman system service --time=0 unix://$podman_sock" || true; }
start_podman() {
	if [ -z "$(service_pid)" ]; then
		log "starting the podman service (log: $podman_log)"
		mkdir -p "$(dirname "$podman_sock")" "$(dirname "$podman_log")" "$state/podman"
		# In a directory of its own: after an OOM kill Podman leaves an empty
		# file "oom" in the service's working directory, which must not land
		# in whatever checkout ran this. The redirections are the subshell's,
		# so nothing left running holds this script's standard output: the
		# caller reads it to its end (eval "$(…)") and would wait forever.
		(cd "$state/podman" && exec nohup setsid podman system service --time=0 "unix://$podman_sock") >>"$podman_log" 2>&1 </dev/null &
	fi
	local deadline=$((SECONDS + wait_s))
	until podman_ok; do
		[ "$SECONDS" -lt "$deadline" ] || { tail -n 20 "$podman_log" >&2 || true; die "the podman service did not answer within ${wait_s}s"; }
		sleep 1
	done
}
start_podman
log "podman service is answering"
# Container processes cannot get higher hard limits than the service's
# own (it lowers some of them itself at start), so the defaults are read
# from the running service.
pid=$(service_pid)
[ -n "$pid" ] || die "the podman service answers but its process was not found (started by someone else?)"
hard() { awk -v k="$1" 'index($0, k) == 1 { n = split($0, f, /  +/); print f[3] }' "/proc/$pid/limits"; }
nofile=$(hard "Max open files")
nproc=$(hard "Max processes")
dropin=/etc/containers/containers.conf.d/50-outpost-limits.conf
want=$(printf '# Written by scripts/engines-setup.sh: the Podman service'"'"'s own hard limits.\n[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]' "$nofile" "$nofile" "$nproc" "$nproc")
if [ "$(cat "$dropin" 2>/dev/null || true)" != "$want" ]; then
	mkdir -p "$(dirname "$dropin")"
	printf '%s\n' "$want" >"$dropin"
	log "wrote $dropin (nofile $nofile, nproc $nproc); restarting the podman service"
	kill "$pid"
	for _ in $(seq 1 "$wait_s"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
	start_podman
	log "podman service is answering"
fi

# --- 4. image in Podman's storage -----------------------------------------------------------
docker_id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || die "image $image is not in Docker: run scripts/docker-setup.sh"
podman_id=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
if [ -n "$podman_id" ] && [ "${docker_id#sha256:}" = "${podman_id#sha256:}" ]; then
	log "$image is in Podman's storage"
else
	log "loading $image into Podman (docker save | podman load)"
	docker save "$image" | podman load >&2
	log "$image loaded"
fi

# --- 5. loopback sshd -------------------------------------------------------------------------
sshdir=$state/ssh
mkdir -p "$sshdir"
chmod 0755 "$state" "$sshdir"
if ! id "$ssh_user" >/dev/null 2>&1; then
	log "creating user $ssh_user"
	useradd --system --create-home --home-dir "$state/home" --shell /bin/sh "$ssh_user"
fi
# No password ("*"), but not a locked account ("!"), which sshd without PAM
# refuses even for key logins.
if [ "$(getent shadow "$ssh_user" | cut -d: -f2)" != '*' ]; then
	usermod -p '*' "$ssh_user"
fi
docker_group=$(stat -c %G /var/run/docker.sock 2>/dev/null || echo docker)
if ! id -nG "$ssh_user" | tr ' ' '\n' | grep -qx "$docker_group"; then
	usermod -aG "$docker_group" "$ssh_user"
	log "$ssh_user may use the Docker engine (group $docker_group)"
fi
[ -f "$sshdir/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C outpost-test-host -f "$sshdir/ssh_host_ed25519_key"
[ -f "$sshdir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C outpost-test-client -f "$sshdir/id_ed25519"
install -m 0644 "$sshdir/id_ed25519.pub" "$sshdir/authorized_keys"
printf '[127.0.0.1]:%s %s\n' "$ssh_port" "$(cut -d' ' -f1,2 "$sshdir/ssh_host_ed25519_key.pub")" >"$sshdir/known_hosts"
cat >"$sshdir/sshd_config.new" <<EOF
# Outpost's test sshd (scripts/engines-setup.sh): loopback only, one user, keys only.
ListenAddress 127.0.0.1
Port $ssh_port
HostKey $sshdir/ssh_host_ed25519_key
PidFile $sshdir/sshd.pid
AuthorizedKeysFile $sshdir/authorized_keys
AllowUsers $ssh_user
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTTY no
# Every engine connection is one ssh session; tests open several at once.
MaxStartups 200:30:400
LogLevel ERROR
EOF
sshd_changed=0
if cmp -s "$sshdir/sshd_config.new" "$sshdir/sshd_config"; then
	rm -f "$sshdir/sshd_config.new"
else
	mv "$sshdir/sshd_config.new" "$sshdir/sshd_config"
	sshd_changed=1
fi
cat >"$sshdir/config" <<EOF
# ssh client configuration for Outpost's engine tests (ssh -F this file).
Host 127.0.0.1
	Port $ssh_port
	User $ssh_user
	IdentityFile $sshdir/id_ed25519
	IdentitiesOnly yes
	UserKnownHostsFile $sshdir/known_hosts
	StrictHostKeyChecking yes
	BatchMode yes
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -t -f "$sshdir/sshd_config" || die "sshd rejects $sshdir/sshd_config"
ssh_ok() { ssh -F "$sshdir/config" -o ConnectTimeout=5 127.0.0.1 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
pid=$(cat "$sshdir/sshd.pid" 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
	if [ "$sshd_changed" = 1 ]; then
		log "sshd re-reads its changed configuration"
		kill -HUP "$pid"
		sleep 1
	fi
else
	log "starting sshd on 127.0.0.1:$ssh_port"
	/usr/sbin/sshd -f "$sshdir/sshd_config"
fi
deadline=$((SECONDS + wait_s))
until ssh_ok; do
	[ "$SECONDS" -lt "$deadline" ] || die "ssh to $ssh_user@127.0.0.1:$ssh_port does not reach the Docker engine"
	sleep 1
done
log "ssh://$ssh_user@127.0.0.1:$ssh_port reaches the Docker engine"

cat <<EOF
export OUTPOST_PODMAN_HOST=unix://$podman_sock
export OUTPOST_SSH_DOCKER_HOST=ssh://$ssh_user@127.0.0.1:$ssh_port
export OUTPOST_SSH_CONFIG=$sshdir/config
EOF
