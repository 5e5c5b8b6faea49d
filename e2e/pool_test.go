package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// poolJobs writes n Claude jobs working in ws.
func poolJobs(t *testing.T, ws string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		line, _ := json.Marshal(batch.Job{ID: fmt.Sprintf("job-%02d", i), Agent: "claude", Prompt: fmt.Sprintf("MARK-pool-%02d", i), Workspace: ws})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// TestPooledBatchLeavesNothing runs `outpost batch --pool on` in Docker:
// every job succeeds and no container is left; then a pooled batch whose
// turns hang is interrupted (SIGINT) while the pool holds ready leases
// beside the running turns: it exits 130 and leaves no container.
func TestPooledBatchLeavesNothing(t *testing.T) {
	testenv.Short(t)
	claudeBin := testenv.CLI(t, "claude")
	dockerEnv(t, claudeBin) // gates on the engine and the image
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	outpost := buildOutpost(t)
	ws := workspace(t)
	env := append(os.Environ(), "PATH="+filepath.Dir(claudeBin)+":"+os.Getenv("PATH"))

	jobs := poolJobs(t, ws, 8)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(outpost, "batch", jobs, "--results", results, "--offline", "--concurrency", "2", "--pool", "on",
		"--workspace", ws, "--no-store", "--allow-path", ws)
	cmd.Env, cmd.Dir = env, t.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	recs := readRecords(t, results)
	require.Len(t, recs, 8)
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "job %s: %+v", r.Job, r.Outcome)
		assert.Contains(t, r.Outcome.Text, "MARK-pool-", "job %s", r.Job)
	}
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "a pooled batch left no container")

	// Interrupted: two hanging turns and two ready leases.
	results = filepath.Join(t.TempDir(), "results.jsonl")
	cmd = exec.Command(outpost, "batch", poolJobs(t, ws, 6), "--results", results, "--offline", "--scenario", "hang",
		"--concurrency", "2", "--pool", "on", "--workspace", ws, "--no-store", "--allow-path", ws)
	cmd.Env, cmd.Dir = env, t.TempDir()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return owned(t, cli, cmd.Process.Pid) >= 4 }, 3*time.Minute, 100*time.Millisecond,
		"two turns run and the pool holds two more leases")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, stderr.String())
		assert.Equal(t, 130, exit.ExitCode(), stderr.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("outpost batch did not exit after SIGINT")
	}
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "the interrupted pooled batch left no container")
}
