package host_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
)

// baseEnv is what cmd would pass: the test's PATH only.
func baseEnv() map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH")}
}

func newProvider(t *testing.T) sandbox.Provider {
	t.Helper()
	return host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir()})
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newProvider)
}

func acquire(t *testing.T, p *host.Provider, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := p.Acquire(context.Background(), spec)
	t.Cleanup(func() {
		if sb != nil {
			assert.NoError(t, sb.Release(context.Background()))
		}
	})
	require.NoError(t, err)
	return sb
}

// run executes cmd and returns stdout and the status.
func run(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) (string, sandbox.ExitStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := sb.Exec(ctx, cmd)
	require.NoError(t, err)
	defer p.Close()
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	st, err := p.Wait()
	require.NoError(t, err)
	return string(out), st
}

func TestPrivateHomeRemovedOnRelease(t *testing.T) {
	tmp := t.TempDir()
	p := host.New(host.Options{Env: baseEnv(), TempDir: tmp})
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(sb.Home(), tmp+string(filepath.Separator)), "home %s under TempDir", sb.Home())
	assert.True(t, strings.HasPrefix(sb.Root(), tmp+string(filepath.Separator)), "root %s under TempDir", sb.Root())
	fi, err := os.Stat(sb.Home())
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode())

	// Read-only directories (like Go's module cache) do not stop removal.
	_, st := run(t, sb, sandbox.Command{Args: []string{"sh", "-c",
		`mkdir -p "$HOME/ro/deeper" && echo x > "$HOME/ro/deeper/f" && chmod 500 "$HOME/ro/deeper" "$HOME/ro" && echo y > data`}})
	require.True(t, st.Success(), st.String())

	require.NoError(t, sb.Release(context.Background()))
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "the lease directory, home and temporary workspace are gone")
	require.NoError(t, sb.Release(context.Background()))
}

func TestRealHome(t *testing.T) {
	real := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(real, ".keep"), []byte("mine"), 0o600))
	p := host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir(), RealHome: real})
	sb := acquire(t, p, sandbox.Spec{RealHome: true})
	assert.Equal(t, real, sb.Home())
	out, st := run(t, sb, sandbox.Command{Args: []string{"sh", "-c", `cat "$HOME/.keep"`}})
	require.True(t, st.Success())
	assert.Equal(t, "mine", out)
	require.NoError(t, sb.Release(context.Background()))
	_, err := os.Stat(filepath.Join(real, ".keep"))
	assert.NoError(t, err, "the real home is never removed")

	_, err = host.New(host.Options{Env: baseEnv()}).Acquire(context.Background(), sandbox.Spec{RealHome: true})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "RealHome without Options.RealHome: %v", err)
}

func TestSpecChecks(t *testing.T) {
	p := host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir()})
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for name, spec := range map[string]sandbox.Spec{
		"network none":      {Network: "none"},
		"network bridge":    {Network: "bridge"},
		"user":              {User: "1000:1000"},
		"mounts":            {Mounts: []sandbox.Mount{{Source: "/", Target: "/host"}}},
		"forwards":          {Forwards: []sandbox.Forward{{Socket: "/run/x.sock", Port: 8080}}},
		"missing workspace": {Workspace: filepath.Join(t.TempDir(), "missing")},
		"file workspace":    {Workspace: file},
		"bad env name":      {Env: map[string]string{"NOT-VALID": "x"}},
	} {
		sb, err := p.Acquire(context.Background(), spec)
		assert.Nil(t, sb, name)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: want configuration error, got %v", name, err)
	}
	// Container-only knobs are ignored, not refused; "host" networking is what the host has.
	acquire(t, p, sandbox.Spec{Network: "host", Image: "img", CPUs: 1, MemoryBytes: 1 << 30, Pids: 10,
		Labels: map[string]string{"a": "b"}})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Acquire(ctx, sandbox.Spec{})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestLookPathUsesCommandEnvironment(t *testing.T) {
	// No base environment at all: nothing is found on a PATH that is not set,
	// whatever this test process's PATH is.
	p := host.New(host.Options{TempDir: t.TempDir()})
	sb := acquire(t, p, sandbox.Spec{})
	_, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sh", "-c", "true"}})
	require.Error(t, err)
	assert.ErrorIs(t, err, exec.ErrNotFound)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)

	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	out, st := run(t, sb, sandbox.Command{Args: []string{"sh", "-c", "echo found"},
		Env: map[string]string{"PATH": filepath.Dir(sh)}})
	require.True(t, st.Success())
	assert.Equal(t, "found\n", out)

	// A program in the working directory is not found through a relative PATH entry...
	require.NoError(t, os.WriteFile(filepath.Join(sb.Root(), "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755))
	_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"tool"}, Env: map[string]string{"PATH": ".:"}})
	assert.ErrorIs(t, err, exec.ErrNotFound)
	// ...but is by an explicit relative path, resolved against the directory.
	out, st = run(t, sb, sandbox.Command{Args: []string{"./tool"}, Env: map[string]string{"PATH": filepath.Dir(sh)}})
	require.True(t, st.Success())
	assert.Equal(t, "tool\n", out)
}

func TestEnvironmentOrder(t *testing.T) {
	p := host.New(host.Options{TempDir: t.TempDir(), Env: map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/base/home", "LANG": "C.UTF-8", "OUTPOST_X": "base"}})
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"OUTPOST_X": "spec"}})
	out, _ := run(t, sb, sandbox.Command{Args: []string{"sh", "-c", `printf '%s|%s|%s|%s' "$HOME" "$LANG" "$OUTPOST_X" "$PWD"`}})
	assert.Equal(t, sb.Home()+"|C.UTF-8|spec|"+sb.Root(), out, "HOME is the lease's, base values pass, Spec.Env wins over base")
	out, _ = run(t, sb, sandbox.Command{Args: []string{"sh", "-c", `printf %s "$HOME"`},
		Env: map[string]string{"HOME": "/explicit"}})
	assert.Equal(t, "/explicit", out, "an explicit Command.Env HOME wins")
}

func TestCloseKillsAndExecAfterCancel(t *testing.T) {
	p := host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir()})
	sb := acquire(t, p, sandbox.Spec{})
	proc, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sleep", "300"}})
	require.NoError(t, err)
	require.NoError(t, proc.Close())
	st, err := proc.Wait()
	require.NoError(t, err)
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, st)
	n, err := proc.Stdout().Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF, "Stdout after Close is at EOF")
	assert.NoError(t, proc.Signal(syscall.SIGTERM), "Signal after Close is a no-op")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
}

func TestLogsNeverCarryValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const secret = "outpost-log-secret-value"
	p := host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir(), Logger: log})
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"OUTPOST_SPEC_SECRET": secret}})
	_, st := run(t, sb, sandbox.Command{Args: []string{"true"}, Env: map[string]string{"OUTPOST_SECRET": secret}})
	require.True(t, st.Success())
	require.NoError(t, sb.Release(context.Background()))
	assert.Contains(t, buf.String(), "OUTPOST_SECRET", "names are logged")
	assert.NotContains(t, buf.String(), secret)
}
