package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestGradePredictionsDocker: `outpost grade` grades a predictions file
// written by another harness — a correct patch, a wrong one and an empty
// one — each in a Docker verifier lease of its own (the verifier sees
// /.dockerenv) on tests the patches never saw: pass, fail, fail; no
// container is left, and `outpost report` renders the run directory.
func TestGradePredictionsDocker(t *testing.T) {
	testenv.Short(t)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
	outpost := buildOutpost(t)
	root := t.TempDir()
	task := filepath.Join(root, "task")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "app.sh"), []byte("echo 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "tests", "check.sh"), []byte("exit 0\n"), 0o644))
	gitCmd(t, task, "init", "-q", "-b", "main")
	gitCmd(t, task, "add", "-A")
	gitCmd(t, task, "commit", "-q", "-m", "task")
	hidden := filepath.Join(root, "hidden", "tests")
	require.NoError(t, os.MkdirAll(hidden, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "check.sh"),
		[]byte("[ \"$(sh app.sh)\" = 2 ] || { echo \"want 2, got $(sh app.sh)\"; exit 1; }\necho verified\n"), 0o644))

	verify := `{"command":"test -f /.dockerenv && echo in-docker; sh tests/check.sh","files":"hidden","timeout":"2m"}`
	tasks := strings.Join([]string{
		`{"id":"one","source":{"repo":"task","commit":"main"},"metadata":{"instance_id":"app__1"},"verify":` + verify + `}`,
		`{"id":"two","source":{"repo":"task","commit":"main"},"metadata":{"instance_id":"app__2"},"verify":` + verify + `}`,
	}, "\n") + "\n"
	tasksFile := filepath.Join(root, "tasks.jsonl")
	require.NoError(t, os.WriteFile(tasksFile, []byte(tasks), 0o600))
	patch := func(to string) string {
		return "diff --git a/app.sh b/app.sh\n--- a/app.sh\n+++ b/app.sh\n@@ -1 +1 @@\n-echo 1\n+echo " + to + "\n"
	}
	var preds strings.Builder
	for _, p := range []map[string]any{
		{"instance_id": "app__1", "model_name_or_path": "elsewhere/model", "model_patch": patch("2"), "exit_status": "submitted"},
		{"instance_id": "app__1", "model_name_or_path": "elsewhere/model", "model_patch": patch("3")},
		{"instance_id": "app__2", "model_name_or_path": "elsewhere/model", "model_patch": ""},
	} {
		b, err := json.Marshal(p)
		require.NoError(t, err)
		preds.Write(b)
		preds.WriteByte('\n')
	}
	predsFile := filepath.Join(t.TempDir(), "preds.jsonl")
	require.NoError(t, os.WriteFile(predsFile, []byte(preds.String()), 0o600))
	out := filepath.Join(t.TempDir(), "graded")

	cmd := exec.Command(outpost, "grade", predsFile, "--tasks", tasksFile, "--out", out, "--concurrency", "3")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	combined, err := cmd.CombinedOutput()
	require.NoError(t, err, "verdicts do not change the exit code: %s", combined)
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no verifier container left")
	assert.Contains(t, string(combined), "solved 1 of 3 graded jobs (2 failed, 0 verifier errors)")
	assert.Contains(t, string(combined), "task one: 1 of 2 passed, pass@1 0.500, pass@2 1.000")

	recs := readRecords(t, filepath.Join(out, runrec.ResultsFile))
	require.Len(t, recs, 3, string(combined))
	want := map[string]struct {
		verdict harness.Verdict
		output  string
	}{
		"one#1": {harness.VerdictPass, "verified"},
		"one#2": {harness.VerdictFail, "want 2, got 3"},
		"two":   {harness.VerdictFail, "want 2, got 1"},
	}
	for _, r := range recs {
		w, ok := want[r.Job]
		require.True(t, ok, r.Job)
		assert.Empty(t, r.Agent, r.Job)
		assert.Equal(t, w.verdict, r.Verdict, "%s: %+v", r.Job, r.Verify)
		require.NotNil(t, r.Verify, r.Job)
		assert.Contains(t, r.Verify.Output, "in-docker", "%s: graded in a Docker lease", r.Job)
		assert.Contains(t, r.Verify.Output, w.output, r.Job)
		assert.Contains(t, string(r.Metadata), `"model_name_or_path":"elsewhere/model"`, r.Job)
	}

	rep, err := exec.Command(outpost, "report", out).CombinedOutput()
	require.NoError(t, err, string(rep))
	assert.Contains(t, string(rep), "one#2")
}
