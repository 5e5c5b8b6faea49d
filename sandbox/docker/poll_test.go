package docker_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// countingEngine relays a unix socket to the Docker engine's and counts the
// exec inspections (GET /…/exec/ID/json) that pass through it.
func countingEngine(t *testing.T) (host string, inspects *atomic.Int64) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	inspects = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, inspects)
		}
	}()
	return "unix://" + sock, inspects
}

func relay(c net.Conn, inspects *atomic.Int64) {
	defer c.Close()
	u, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		return
	}
	defer u.Close()
	go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			line, _, _ := bytes.Cut(buf[:n], []byte("\r\n"))
			if bytes.HasPrefix(line, []byte("GET ")) && bytes.Contains(line, []byte("/exec/")) && bytes.Contains(line, []byte("/json ")) {
				inspects.Add(1)
			}
			if _, werr := u.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A running exec is inspected rarely: its stream's end reports the exit,
// and polling only catches a grandchild holding the output open. Before,
// a half-second command was inspected six times or more (10 ms doubling).
func TestExecInspectsRarelyWhileRunning(t *testing.T) {
	engine(t) // skips without an engine
	if current().endpoint.Host != "" {
		t.Skip("counts requests to the local Docker socket only")
	}
	host, inspects := countingEngine(t)
	p := newProvider(t, docker.Options{Host: host})
	sb := acquire(t, p, sandbox.Spec{})
	// The lease's first command is its keeper's, without an exec; the
	// second is an exec.
	require.True(t, run(context.Background(), t, sb, sandbox.Command{Args: []string{"true"}}).status.Success())
	require.Zero(t, inspects.Load(), "the keeper's command is not an exec")
	start := time.Now()
	r := run(context.Background(), t, sb, sandbox.Command{Args: []string{"sleep", "0.5"}})
	took := time.Since(start)
	require.NoError(t, r.err)
	require.True(t, r.status.Success(), "%v %s", r.status, r.stderr)
	// The schedule polls at 250 ms, 750 ms, then every second; one inspect
	// follows the stream's end, and one more may if the engine records the
	// exit a moment after it.
	polls := 0
	for at, d := 250*time.Millisecond, 250*time.Millisecond; at < took; at += d {
		polls++
		d = min(2*d, time.Second)
	}
	assert.LessOrEqual(t, inspects.Load(), int64(polls+2), "exec inspections for a command of %s", took)
	assert.Positive(t, inspects.Load(), "an exec's exit is read by an inspect")
}
