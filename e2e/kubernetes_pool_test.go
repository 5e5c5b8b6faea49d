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
)

// TestKubernetesPooledBatch: `outpost batch --sandbox kubernetes --pool
// on` runs every job and leaves no pod; a pooled batch interrupted
// (SIGINT) while its pool holds ready pods beside the running turns
// exits 130 and leaves nothing.
func TestKubernetesPooledBatch(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	cs := kubeClient(t, kc)
	bin := buildOutpost(t)
	dir := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".outpost", "drivers"), 0o755))
	// A driver whose binary the image has: no CLI to copy into the pods.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".outpost", "drivers", "echo.json"), []byte(`{"id":"echo","binary":"sh",
		"args":["-c","read -r p; case $p in hang*) sleep 600;; esac; echo answer: $p"],
		"stdin":"${input.prompt}","output":{"mode":"text"}}`), 0o644))
	jobs := func(n int, prefix string) string {
		var b strings.Builder
		for i := range n {
			line, _ := json.Marshal(batch.Job{ID: fmt.Sprintf("job-%02d", i), Agent: "echo", Prompt: fmt.Sprintf("%s MARK-kpool-%02d", prefix, i)})
			b.Write(line)
			b.WriteByte('\n')
		}
		path := filepath.Join(dir, prefix+"-jobs.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	pods := func(pid int) int {
		n := 0
		for _, s := range kubeLeft(t, cs, pid) {
			if strings.HasPrefix(s, "pod/") {
				n++
			}
		}
		return n
	}
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "OUTPOST_STATE_DIR="+t.TempDir())
		return cmd
	}

	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := run("batch", jobs(6, "say"), "--results", results, "--sandbox", "kubernetes", "--concurrency", "2", "--pool", "on", "--no-store")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	recs := readRecords(t, results)
	require.Len(t, recs, 6)
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "job %s: %+v", r.Job, r.Outcome)
		assert.Contains(t, r.Outcome.Text, "answer: say MARK-kpool-", "job %s", r.Job)
	}
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "a pooled batch left nothing")

	results = filepath.Join(t.TempDir(), "results.jsonl")
	cmd = run("batch", jobs(4, "hang"), "--results", results, "--sandbox", "kubernetes", "--concurrency", "2", "--pool", "on", "--no-store")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return pods(cmd.Process.Pid) >= 4 }, 3*time.Minute, 200*time.Millisecond,
		"two turns run and the pool holds two more pods")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, stderr.String())
		assert.Equal(t, 130, ee.ExitCode(), stderr.String())
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("outpost batch did not exit after SIGINT")
	}
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "the interrupted pooled batch left nothing")
}
