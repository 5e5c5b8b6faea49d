package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// engineCalls relays a unix socket to the local Docker engine's and records
// the request line of every API call that passes through it, as a kind:
// method and path with ids and the API version replaced.
type engineCalls struct {
	mu    sync.Mutex
	kinds []string
}

var (
	apiVersion = regexp.MustCompile(`^/v[0-9.]+/`)
	apiID      = regexp.MustCompile(`/[0-9a-f]{64}(/|$)`)
)

func (e *engineCalls) record(line []byte) {
	method, rest, _ := bytes.Cut(line, []byte(" "))
	target, _, _ := bytes.Cut(rest, []byte(" "))
	path, _, _ := strings.Cut(string(target), "?")
	path = apiVersion.ReplaceAllString(path, "/")
	path = apiID.ReplaceAllString(path, "/ID$1")
	e.mu.Lock()
	e.kinds = append(e.kinds, string(method)+" "+path)
	e.mu.Unlock()
}

func (e *engineCalls) reset() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.kinds
	e.kinds = nil
	return k
}

// listen relays connections on a fresh socket to the engine's and returns
// the socket's address.
func (e *engineCalls) listen(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go e.relay(c)
		}
	}()
	return "unix://" + sock
}

// relay copies one connection both ways, passing a client's half-close
// on (an exec's stdin ends that way) and recording request lines.
func (e *engineCalls) relay(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		return
	}
	defer u.Close()
	back := make(chan struct{})
	go func() {
		defer close(back)
		buf := make([]byte, 64<<10)
		for {
			n, err := u.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = c.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	upgraded := false
	for {
		n, err := c.Read(buf)
		if n > 0 {
			line, _, _ := bytes.Cut(buf[:n], []byte("\r\n"))
			if !upgraded && bytes.Contains(line, []byte(" HTTP/1.")) {
				e.record(line)
				// An attach or exec start upgrades the connection: what
				// follows is the stream, not requests.
				upgraded = bytes.Contains(buf[:n], []byte("Upgrade: tcp"))
			}
			if _, werr := u.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = u.(*net.UnixConn).CloseWrite()
			<-back
			return
		}
	}
}

// A cold turn with the default gateway path (the socket forward) makes
// only the engine calls it needs: the container's create, the lifeline's
// attach, start, and two waits once the lifeline is cut: for the
// container's stop (the turn's release returns then) and, in the
// background, for its own removal (no forced removal: its kill costs the
// turn more). No exec at all: the lease's keeper runs the CLI, whose
// output and status come back on the lifeline, the forwarders' readiness
// arrives there too, and the workspace check runs with the CLI. No
// container inspect. Each of these calls is on the turn's critical path,
// so one more shows here before it shows in BENCHMARKS.md.
func TestDockerColdGatewayTurnCalls(t *testing.T) {
	testenv.Short(t)
	if os.Getenv("DOCKER_HOST") != "" && os.Getenv("DOCKER_HOST") != "unix:///var/run/docker.sock" {
		t.Skip("relays requests to the local Docker socket only")
	}
	calls := &engineCalls{}
	host := calls.listen(t)
	run := "e2e-calls-" + uuid.NewString()
	p, err := docker.New(context.Background(), docker.Options{Host: host, Network: "none", RunID: run, Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	if _, err := p.Client().ImageInspect(context.Background(), docker.DefaultImage); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "image "+docker.DefaultImage)
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		assert.Zero(t, labelled(t, p, run), "containers left for run %s", run)
		_ = p.Close()
	})
	gw, err := gateway.New(gateway.Options{Upstreams: []string{"http://127.0.0.1:9"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.Close() })
	sock := filepath.Join(t.TempDir(), "gateway.sock")
	require.NoError(t, gw.ListenUnix(sock))
	exe, err := os.Executable()
	require.NoError(t, err)
	turn := harness.Turn{
		Adapter:  fakecli.New(fakeInContainer),
		Input:    adapters.Input{Prompt: benchScript},
		Provider: p,
		Spec: sandbox.Spec{
			Network:  "none",
			Mounts:   []sandbox.Mount{{Source: exe, Target: fakeInContainer, ReadOnly: true}},
			Forwards: []sandbox.Forward{{Socket: sock, Port: gateway.DefaultLeasePort}},
		},
	}
	calls.reset() // the probes of New
	res, err := harness.Run(context.Background(), turn)
	require.NoError(t, err)
	require.True(t, res.Exit.Success(), "%v", res.Exit)
	// The removal's wait is the background's, sent once the container
	// stopped: it is in the record once the removal is done.
	require.NoError(t, p.AwaitRemovals(context.Background()))

	got := map[string]int{}
	for _, k := range calls.reset() {
		got[k]++
	}
	want := map[string]int{
		"POST /containers/create":    1,
		"POST /containers/ID/attach": 1,
		"POST /containers/ID/start":  1,
		"POST /containers/ID/wait":   2,
	}
	if !assert.Equal(t, want, got) {
		var ks []string
		for k := range got {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		t.Logf("calls: %v", ks)
	}
}
