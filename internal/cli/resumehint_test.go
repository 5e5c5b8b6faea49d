package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestBatchResumeHintRuns: a batch interrupted while a job runs prints a
// command that continues it; pasted into a shell as printed, it finishes
// the batch with every flag of the first invocation (--offline, --out,
// --predictions, --concurrency, the caps, a value with a space and one
// with a quote), and no job runs twice.
func TestBatchResumeHintRuns(t *testing.T) {
	testenv.Short(t)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777)) // a root host's leases run as uid 1000
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	// gate blocks until the file "release" exists, so the first run is
	// interrupted while it waits and the resumed run finishes it.
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "gate.json"), []byte(`{"id":"gate","binary":"sh",
		"args":["-c","if [ -e release ]; then cat; else touch gate.started; exec sleep 600; fi"],
		"stdin":"${input.prompt}","output":{"mode":"text"}}`), 0o644))
	ok := func(text string) string {
		return `emit {\"type\":\"result\",\"text\":\"` + text + `\"}\nemit {\"type\":\"finished\",\"ok\":true}`
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "jobs.jsonl"), []byte(
		`{"id":"a","agent":"fake","prompt":"`+ok("A")+`","metadata":{"instance_id":"a"}}`+"\n"+
			`{"id":"b","agent":"gate","prompt":"B","metadata":{"instance_id":"b"}}`+"\n"+
			`{"id":"c","agent":"fake","prompt":"`+ok("C")+`","metadata":{"instance_id":"c"}}`+"\n"), 0o644))
	tmp := t.TempDir()
	results := filepath.Join(ws, "my results.jsonl")
	cmd, _, stderr := startOutpost(t, ws, tmp, "batch", "jobs.jsonl", "--offline", "--sandbox", "host", "--workspace", ws,
		"--no-store", "--concurrency", "1", "--results", results, "--out", "run dir", "--predictions", "my preds.jsonl",
		"--max-cost-usd", "5", "--max-batch-cost-usd", "50", "--max-turns", "7", "--timeout", "5m", "--stub-answer", "it's done")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(ws, "gate.started"))
		return err == nil
	}, 60*time.Second, 50*time.Millisecond, "job b started: %s", stderr)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var exit *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &exit, "stderr: %s", stderr)
	assert.Equal(t, 130, exit.ExitCode(), "stderr: %s", stderr)
	assert.NotContains(t, jobLines(t, results), "b", "the interrupted job has no result")

	var hint string
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), "to continue, run:") && sc.Scan() {
			hint = strings.TrimSpace(sc.Text())
		}
	}
	require.NotEmpty(t, hint, "a resume command is printed: %s", stderr)
	for _, flag := range []string{"--offline", "--out=", "--predictions=", "--concurrency=1", "--max-cost-usd=5",
		"--max-batch-cost-usd=50", "--max-turns=7", "--resume", "--results="} {
		assert.Contains(t, hint, flag)
	}

	// Pasted as printed, with the gate open, it completes the batch.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "release"), nil, 0o644))
	sh := exec.Command("sh", "-c", hint)
	sh.Dir = ws
	sh.Env = append(os.Environ(), "TMPDIR="+tmp, stateEnv+"="+t.TempDir())
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "%s\n%s", hint, out)
	assert.Contains(t, string(out), "1 of 3 jobs already have a result (0 failed); running 2")
	lines := jobLines(t, results)
	assert.ElementsMatch(t, []string{"a", "b", "c"}, lines, "every job once, none twice")
	assert.FileExists(t, filepath.Join(ws, "run dir", "manifest.json"))
	assert.Contains(t, string(out), "wrote 3 predictions to my preds.jsonl")
	assert.FileExists(t, filepath.Join(ws, "my preds.jsonl"))
}

// jobLines returns the job of each line of a results file, in order.
func jobLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var jobs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var r struct {
			Job     string
			Outcome struct{ OK bool }
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		assert.True(t, r.Outcome.OK, l)
		jobs = append(jobs, r.Job)
	}
	return jobs
}

// TestBatchResumeCommandWords: --retry-failed becomes --resume (this run's
// failures must not run again), repeatable flags repeat, an explicit false
// stays, and words are quoted for the shell.
func TestBatchResumeCommandWords(t *testing.T) {
	cmd := NewCmdBatch(testFactory(nil, nil, nil, func(string) string { return "" }, time.Now))
	require.NoError(t, cmd.ParseFlags([]string{"--retry-failed=quota", "--env", "A", "--env", "B C", "--json=false",
		"--results", "x", "--memory", "1g"}))
	got := batchResumeCommand(cmd, &BatchOptions{Jobs: "my jobs.jsonl", Results: "it's.jsonl"})
	assert.Equal(t, `outpost batch 'my jobs.jsonl' --env=A '--env=B C' --json=false --memory=1g '--results=it'\''s.jsonl' --resume`, got)
}
