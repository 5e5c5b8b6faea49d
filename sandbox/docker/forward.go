package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
// later. The script then waits until every port listens (read from
// /proc/net/tcp with the shell's own read, so it needs no client tool and
// polling forks nothing but sleep: 10 ms apart, then 50 ms, which matters
// with many leases starting at once) and reports on its standard output,
// which the provider reads on the lifeline's attach: a line [forwardReady],
// or [forwardFailed] and the reason (no socat, nothing listening after
// about 20 s of polling). Either way the shell then
// becomes the lease's keeper ([keeperScript]), so the forwarders live and
// die with the container. Reporting on a stream the provider already
// holds keeps readiness off the lease's critical path: no exec is made to
// ask.
const forwardScript = `if ! command -v socat >/dev/null 2>&1; then
  echo "` + forwardFailed + ` the sandbox image has no socat, which forwards the gateway socket"
else
  ports=
  while [ "$#" -ge 2 ]; do
    (while :; do socat TCP-LISTEN:"$1",bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:"$2"; sleep 1; done) </dev/null >/dev/null 2>&1 &
    ports="$ports $1"; shift 2
  done
  listening() { while read -r _ la _ st _; do [ "$la $st" = "$1 0A" ] && return 0; done </proc/net/tcp; return 1; }
  bad=
  for p in $ports; do
    h=$(printf '%04X' "$p"); n=0
    until listening "0100007F:$h"; do
      n=$((n+1))
      if [ "$n" -ge 400 ]; then bad=$p; break 2; fi
      if [ "$n" -le 10 ]; then sleep 0.01; else sleep 0.05; fi
    done
  done
  if [ -n "$bad" ]; then echo "` + forwardFailed + ` nothing listens on 127.0.0.1:$bad"; else echo ` + forwardReady + `; fi
fi
` + keeperScript

// The lines forwardScript reports on its standard output.
const (
	forwardReady  = "outpost-forwards-ready"
	forwardFailed = "outpost-forwards-failed:"
)

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

// awaitForwards waits until the lease's forwarders listen: it reads the
// line forwardScript reports on the lifeline attach's stdout (s). The
// attach was made before the container started, so the line cannot be
// missed; ctx ends the wait by closing the lifeline (the lease is released
// then anyway).
func (l *lease) awaitForwards(ctx context.Context, s *lifeStream) error {
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, l.cutLifeline)
	line, err := s.line()
	// The lifeline was cut (or is being cut) if stop comes too late: the
	// lease is lost even when the line was read.
	cut := !stop()
	switch {
	case cut:
		return outposterr.Wrap(outposterr.Sandbox, ctx.Err(), "start socket forwarders in %s", shortID(l.id))
	case err != nil:
		return outposterr.Wrap(outposterr.Sandbox, err, "start socket forwarders in %s", shortID(l.id))
	case line == forwardReady:
		return nil
	case strings.HasPrefix(line, forwardFailed):
		return outposterr.New(outposterr.Sandbox, "start socket forwarders in %s: %s",
			shortID(l.id), strings.TrimSpace(strings.TrimPrefix(line, forwardFailed)))
	}
	return outposterr.New(outposterr.Sandbox, "start socket forwarders in %s: unexpected report %q", shortID(l.id), line)
}
