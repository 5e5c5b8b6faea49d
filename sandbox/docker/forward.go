package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/docker/docker/api/types/mount"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// ForwardDir is where Spec.Forwards sockets are mounted inside a lease
// (forward-<n>.sock, read-only: connecting to a socket needs no write
// access to the mount).
const ForwardDir = "/run/outpost"

// forwardScript is the container's entrypoint when the spec has forwards:
// sh -c forwardScript outpost-forward PORT SOCKET [PORT SOCKET]...
// Each pair gets a supervised socat that listens on the lease's own
// 127.0.0.1:PORT and relays every connection to SOCKET; a socat that dies
// (killed by the agent, which runs as the same user) is restarted a second
// later. The shell then becomes the lease's keeper ([keeperScript]), so the
// forwarders live and die with the container. Without socat it only keeps
// the lease and the readiness check reports the missing program.
const forwardScript = `command -v socat >/dev/null 2>&1 || { ` + keeperScript + `; exit 0; }
while [ "$#" -ge 2 ]; do
  (while :; do socat TCP-LISTEN:"$1",bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:"$2"; sleep 1; done) </dev/null >/dev/null 2>&1 &
  shift 2
done
` + keeperScript

// forwardReadyScript waits until every port listens on 127.0.0.1 inside the
// lease (read from /proc/net/tcp, so it needs no client tool):
// sh -c forwardReadyScript outpost-forward-ready PORT...
const forwardReadyScript = `command -v socat >/dev/null 2>&1 || { echo "the sandbox image has no socat, which forwards the gateway socket" >&2; exit 127; }
for p in "$@"; do
  h=$(printf '%04X' "$p"); i=0
  until grep -q ": 0100007F:$h 00000000:0000 0A" /proc/net/tcp; do
    i=$((i+1))
    if [ "$i" -ge 200 ]; then echo "nothing listens on 127.0.0.1:$p" >&2; exit 1; fi
    sleep 0.05
  done
done`

// forwardPlan validates Spec.Forwards and returns their mounts and the
// entrypoint arguments (PORT SOCKET pairs, sandbox paths).
func forwardPlan(fwds []sandbox.Forward, network string) ([]mount.Mount, []string, error) {
	if len(fwds) == 0 {
		return nil, nil, nil
	}
	if network == "host" {
		return nil, nil, outposterr.New(outposterr.Configuration,
			"socket forwards need the lease's own loopback; network %q shares the host's", network)
	}
	var mounts []mount.Mount
	var args []string
	ports := map[int]bool{}
	for i, f := range fwds {
		if f.Port < 1 || f.Port > 65535 {
			return nil, nil, outposterr.New(outposterr.Configuration, "forward port %d out of range", f.Port)
		}
		if ports[f.Port] {
			return nil, nil, outposterr.New(outposterr.Configuration, "forward port %d given twice", f.Port)
		}
		ports[f.Port] = true
		if !filepath.IsAbs(f.Socket) {
			return nil, nil, outposterr.New(outposterr.Configuration, "forward socket %q is not absolute", f.Socket)
		}
		if err := checkSocket(f.Socket); err != nil {
			return nil, nil, err
		}
		target := fmt.Sprintf("%s/forward-%d.sock", ForwardDir, i)
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: f.Socket, Target: target, ReadOnly: true})
		args = append(args, strconv.Itoa(f.Port), target)
	}
	return mounts, args, nil
}

func checkSocket(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "forward socket")
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return outposterr.New(outposterr.Configuration, "forward socket %s is not a unix socket", p)
	}
	return nil
}

// awaitForwards waits until the lease's forwarders listen.
func (l *lease) awaitForwards(ctx context.Context, args []string) error {
	var ports []string
	for i := 0; i < len(args); i += 2 {
		ports = append(ports, args[i])
	}
	argv := append([]string{"sh", "-c", forwardReadyScript, "outpost-forward-ready"}, ports...)
	if _, err := l.quick(ctx, argv); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "start socket forwarders in %s", shortID(l.id))
	}
	return nil
}
