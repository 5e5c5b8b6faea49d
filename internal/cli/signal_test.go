package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// hangProject writes a project whose "hang" driver starts a turn and never
// ends it; the driver records its pid in the workspace.
func hangProject(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777)) // a root host's leases run as uid 1000
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "hang.json"), []byte(`{"id":"hang","binary":"sh",
		"args":["hang.sh"],"requires_final":true,
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}}]}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "hang.sh"), []byte(`echo $$ > hang.pid
echo '{"t":"id","v":"hang-1"}'
exec sleep 600
`), 0o644))
	return ws
}

// startOutpost starts the outpost command (this test binary) in dir with
// its own temporary directory, and returns it with its stdout and stderr.
func startOutpost(t *testing.T, dir, tmp string, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	outpost, err := exec.LookPath("outpost")
	require.NoError(t, err, "the test binary is on PATH as outpost")
	cmd := exec.Command(outpost, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, stateEnv+"="+t.TempDir())
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		// A driver left running by a failed test: end its group.
		if b, err := os.ReadFile(filepath.Join(dir, "hang.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return cmd, &stdout, &stderr
}

// hostHomes lists the host sandbox lease directories under tmp.
func hostHomes(t *testing.T, tmp string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(tmp, host.LeasePrefix+"*"))
	require.NoError(t, err)
	return m
}

// TestSignalsReleaseLeases: SIGHUP, SIGQUIT, SIGINT and SIGTERM each stop a
// running turn like Ctrl-C: the outpost command exits 128 plus the signal's
// number, leaves no container and no host sandbox home, and SIGQUIT dumps
// no goroutines.
func TestSignalsReleaseLeases(t *testing.T) {
	testenv.Short(t)
	sandboxes := []string{"host"}
	var cli interface {
		ContainerList(context.Context, container.ListOptions) ([]container.Summary, error)
	}
	if c, err := docker.NewClient(""); err == nil {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, perr := c.Ping(ctx)
		cancel()
		if perr == nil {
			sandboxes = append(sandboxes, "docker")
			cli = c
		} else if os.Getenv(testenv.RequireDockerEnv) == "1" {
			t.Fatalf("Docker engine unreachable: %v", perr)
		}
	}
	for _, sb := range sandboxes {
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGINT, syscall.SIGTERM} {
			t.Run(sb+"/"+sig.String(), func(t *testing.T) {
				ws := hangProject(t)
				tmp := t.TempDir()
				cmd, stdout, stderr := startOutpost(t, ws, tmp, "run", "--agent", "hang", "--sandbox", sb, "--no-store",
					"--workspace", ws, "--json", "go")
				owned := func() int {
					if sb == "host" {
						return len(hostHomes(t, tmp))
					}
					list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
						Filters: filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(cmd.Process.Pid)))})
					require.NoError(t, err)
					return len(list)
				}
				require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `"conversation"`) },
					60*time.Second, 50*time.Millisecond, "the turn started: %s", stderr)
				require.Equal(t, 1, owned(), "one lease while the turn runs")

				require.NoError(t, cmd.Process.Signal(sig))
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					var exit *exec.ExitError
					require.ErrorAs(t, err, &exit, "stderr: %s", stderr)
					assert.Equal(t, 128+int(sig), exit.ExitCode(), "stderr: %s", stderr)
				case <-time.After(45 * time.Second):
					t.Fatalf("outpost did not exit after %s", sig)
				}
				assert.Zero(t, owned(), "no lease is left when outpost exits")
				assert.Contains(t, stdout.String(), `"class":"aborted"`)
				assert.NotContains(t, stderr.String(), "goroutine ", "no goroutine dump")
			})
		}
	}
}

// TestGCReapsHostHomeOfKilledRun: kill -9 leaves a host sandbox home
// behind; `outpost gc` finds it (its owner is gone) and removes it, and
// --dry-run only lists it.
func TestGCReapsHostHomeOfKilledRun(t *testing.T) {
	testenv.Short(t)
	ws := hangProject(t)
	tmp := t.TempDir()
	cmd, stdout, stderr := startOutpost(t, ws, tmp, "run", "--agent", "hang", "--sandbox", "host", "--no-store",
		"--workspace", ws, "--json", "go")
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `"conversation"`) },
		60*time.Second, 50*time.Millisecond, "the turn started: %s", stderr)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	homes := hostHomes(t, tmp)
	require.Len(t, homes, 1, "kill -9 leaves the home behind")

	// An unreachable engine is reported; the host sandbox is swept anyway.
	code, out, errOut := runGC(t, ws, tmp, "--dry-run")
	assert.Equal(t, int(ExitSandbox), code, errOut)
	assert.Contains(t, out, "left over host sandbox "+homes[0])
	assert.Contains(t, out, "is gone")
	assert.Contains(t, errOut, "docker engine unreachable")
	assert.DirExists(t, homes[0])

	code, out, errOut = runGC(t, ws, tmp)
	assert.Equal(t, int(ExitSandbox), code, errOut)
	assert.Contains(t, out, "removed host sandbox "+homes[0])
	assert.NoDirExists(t, homes[0])
}

// runGC runs `outpost gc` with TMPDIR=tmp and an unreachable engine.
func runGC(t *testing.T, dir, tmp string, args ...string) (int, string, string) {
	t.Helper()
	outpost, err := exec.LookPath("outpost")
	require.NoError(t, err)
	c := exec.Command(outpost, append([]string{"gc"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "TMPDIR="+tmp, "DOCKER_HOST=unix://"+filepath.Join(tmp, "no-docker.sock"))
	var out, errOut strings.Builder
	c.Stdout, c.Stderr = &out, &errOut
	err = c.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errOut.String()
}

// lockedBuffer is a strings.Builder safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
