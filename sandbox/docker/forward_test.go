package docker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// hostSocket serves HTTP on a unix socket in a private (0700) directory,
// connectable by any uid, and answers "hello from the host socket".
func hostSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "outpost-fwd-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o700))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "gw.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(sock, 0o666))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello from the host socket")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// get fetches http://127.0.0.1:port/ from inside sb with socat (the only
// client tool the base image has).
func get(t *testing.T, sb sandbox.Sandbox, port int) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return run(ctx, t, sb, sh(`printf 'GET / HTTP/1.0\r\nHost: x\r\n\r\n' | socat -t 5 - TCP:127.0.0.1:`+strconv.Itoa(port)))
}

// TestForwardWithoutNetwork: a lease with network "none" reaches a host
// unix socket through its own loopback, and nothing else: it has no route,
// and a listener on the host's loopback is not its loopback.
func TestForwardWithoutNetwork(t *testing.T) {
	p := newProvider(t, docker.Options{Network: "none"})
	sock := hostSocket(t)
	const port = 47321
	sb := acquire(t, p, sandbox.Spec{Forwards: []sandbox.Forward{{Socket: sock, Port: port}}})

	r := get(t, sb, port)
	require.Equal(t, 0, r.status.Code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "hello from the host socket")

	// A second listener on the host's loopback is unreachable from the lease.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nhost loopback")
			c.Close()
		}
	}()
	hostPort := ln.Addr().(*net.TCPAddr).Port
	r = get(t, sb, hostPort)
	assert.NotEqual(t, 0, r.status.Code, "the host's loopback is not reachable: %s", r.stdout)
	assert.NotContains(t, r.stdout, "host loopback")

	r = run(context.Background(), t, sb, sh(`cat /proc/net/route | wc -l; ls /sys/class/net`))
	lines := strings.Fields(r.stdout)
	require.NotEmpty(t, lines)
	assert.Equal(t, "1", lines[0], "no route besides the header line")
	assert.Equal(t, []string{"lo"}, lines[1:], "only a loopback interface")

	// The forwarder runs as the lease user, not root.
	r = run(context.Background(), t, sb, sh(`for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = socat ] && awk '/^Uid:/{print $2}' $d/status; done | sort -u`))
	assert.Equal(t, "1000", strings.TrimSpace(r.stdout))

	// A forwarder the agent kills comes back.
	r = run(context.Background(), t, sb, sh(`n=0; for d in /proc/[0-9]*; do if [ "$(cat $d/comm 2>/dev/null)" = socat ]; then kill ${d#/proc/} && n=$((n+1)); fi; done; echo $n`))
	require.Equal(t, 0, r.status.Code, r.stderr)
	assert.NotEqual(t, "0", strings.TrimSpace(r.stdout), "the forwarder was killed")
	assert.Eventually(t, func() bool {
		return strings.Contains(get(t, sb, port).stdout, "hello from the host socket")
	}, 20*time.Second, 200*time.Millisecond, "the forwarder is supervised")
}

// TestForwardSpecChecks: invalid forwards are configuration errors before
// any container exists.
func TestForwardSpecChecks(t *testing.T) {
	p := newProvider(t, docker.Options{Network: "none"})
	sock := hostSocket(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for name, spec := range map[string]sandbox.Spec{
		"host network":   {Network: "host", Forwards: []sandbox.Forward{{Socket: sock, Port: 4000}}},
		"relative":       {Forwards: []sandbox.Forward{{Socket: "gw.sock", Port: 4000}}},
		"missing":        {Forwards: []sandbox.Forward{{Socket: sock + ".missing", Port: 4000}}},
		"regular file":   {Forwards: []sandbox.Forward{{Socket: file, Port: 4000}}},
		"port 0":         {Forwards: []sandbox.Forward{{Socket: sock, Port: 0}}},
		"port too large": {Forwards: []sandbox.Forward{{Socket: sock, Port: 70000}}},
		"duplicate port": {Forwards: []sandbox.Forward{{Socket: sock, Port: 4000}, {Socket: sock, Port: 4000}}},
	} {
		sb, err := p.Acquire(context.Background(), spec)
		assert.Nil(t, sb, name)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%s: %v", name, err)
	}
	assert.Empty(t, p.Live())
}

// TestForwardNeedsSocat: an image without socat fails the lease with a
// sandbox error that says so, and leaves nothing behind.
func TestForwardNeedsSocat(t *testing.T) {
	cli := engine(t)
	if _, err := cli.ImageInspect(context.Background(), "debian:bookworm-slim"); err != nil {
		t.Skip("debian:bookworm-slim is not present")
	}
	p := newProvider(t, docker.Options{Network: "none", OpTimeout: 20 * time.Second})
	sock := hostSocket(t)
	sb, err := p.Acquire(context.Background(), sandbox.Spec{Image: "debian:bookworm-slim", User: "0:0",
		Forwards: []sandbox.Forward{{Socket: sock, Port: 4000}}})
	assert.Nil(t, sb)
	require.Error(t, err)
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "socat")
	assert.Empty(t, p.Live())
}

// TestForwardReadinessNeedsNoExec: a lease with forwards is ready, its
// forwarder listening, without the provider running any command in it
// (the entrypoint reports on the lifeline's stdout): the engine sees no
// exec for the container until the first one asked for.
func TestForwardReadinessNeedsNoExec(t *testing.T) {
	cli := engine(t)
	p := newProvider(t, docker.Options{Network: "none"})
	sock := hostSocket(t)
	const port = 47322
	mark := "fwd-noexec-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := strconv.FormatInt(time.Now().Add(-2*time.Second).Unix(), 10)
	sb := acquire(t, p, sandbox.Spec{Labels: map[string]string{"test.mark": mark},
		Forwards: []sandbox.Forward{{Socket: sock, Port: port}}})
	r := get(t, sb, port)
	require.Equal(t, 0, r.status.Code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "hello from the host socket")

	// Since and Until replay the events of this container from before the
	// call up to now. The get is the lease's first command, which its
	// keeper runs without an exec; any exec the engine saw would have come
	// from the provider.
	msgs, errs := cli.Events(ctx, events.ListOptions{Since: since, Until: strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("label", "test.mark="+mark))})
	var seen []string
	for {
		select {
		case m := <-msgs:
			seen = append(seen, string(m.Action))
			assert.False(t, strings.HasPrefix(string(m.Action), "exec_create"), "an exec ran: %v", seen)
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("events: %v (seen %v)", err, seen)
			}
			assert.Contains(t, seen, "start", "the container's events were seen")
			return
		}
	}
}
