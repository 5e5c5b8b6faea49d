package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestEvalVerify: real CLIs offline in Docker make a correct fix, a wrong
// fix and a fix that rewrites the task's tests (each through their shell
// tool, scripted by the model server), each graded by a verifier in a
// lease of its own on tests the agent never saw: pass with reward 1, fail
// with reward 0, and fail again for the tampering attempt (the hidden
// tests win); predictions hold one line per instance, the passing one.
func TestEvalVerify(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	task := filepath.Join(root, "task")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "app.sh"), []byte("echo 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "tests", "check.sh"), []byte("exit 1\n"), 0o644))
	gitCmd(t, task, "init", "-q", "-b", "main")
	gitCmd(t, task, "add", "-A")
	gitCmd(t, task, "commit", "-q", "-m", "task")
	hidden := filepath.Join(root, "hidden", "tests")
	require.NoError(t, os.MkdirAll(hidden, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "check.sh"),
		[]byte("[ \"$(sh app.sh)\" = 2 ] || { echo \"want 2, got $(sh app.sh)\"; exit 1; }\necho verified\n"), 0o644))

	type job struct {
		ID       string         `json:"id"`
		Agent    string         `json:"agent"`
		Prompt   string         `json:"prompt"`
		Source   map[string]any `json:"source"`
		Metadata map[string]any `json:"metadata"`
		Verify   map[string]any `json:"verify"`
	}
	verify := map[string]any{"command": "sh tests/check.sh", "files": "hidden", "timeout": "2m"}
	src := map[string]any{"repo": "task", "commit": "main"}
	jobs := []job{
		{ID: "fixed", Agent: "claude", Prompt: "MARK-fixed " + outposttest.RunDirective("echo 'echo 2' > app.sh"),
			Source: src, Metadata: map[string]any{"instance_id": "app__1"}, Verify: verify},
		{ID: "wrong", Agent: "codex", Prompt: "MARK-wrong " + outposttest.RunDirective("echo 'echo 3' > app.sh"),
			Source: src, Metadata: map[string]any{"instance_id": "app__1"}, Verify: verify},
		{ID: "tamper", Agent: "claude", Prompt: "MARK-tamper " + outposttest.RunDirective("echo 'exit 0' > tests/check.sh"),
			Source: src, Metadata: map[string]any{"instance_id": "app__2"}, Verify: verify},
	}
	var b strings.Builder
	for _, j := range jobs {
		line, err := json.Marshal(j)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	jobsFile := filepath.Join(root, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobsFile, []byte(b.String()), 0o600))
	results := filepath.Join(t.TempDir(), "results.jsonl")
	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	cmd := exec.Command(outpost, "batch", jobsFile, "--results", results, "--offline", "--no-store", "--concurrency", "3",
		"--predictions", preds)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "verdicts do not change the exit code: %s", out)
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no container left, the verifiers' included")

	recs := readRecords(t, results)
	require.Len(t, recs, 3, string(out))
	want := map[string]struct {
		verdict harness.Verdict
		reward  float64
		output  string
	}{
		"fixed":  {harness.VerdictPass, 1, "verified"},
		"wrong":  {harness.VerdictFail, 0, "want 2, got 3"},
		"tamper": {harness.VerdictFail, 0, "want 2, got 1"},
	}
	for _, r := range recs {
		w := want[r.Job]
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		require.NotNil(t, r.Patch, r.Job)
		assert.NotEmpty(t, r.Patch.Files, "%s: the agent's edit is in its patch", r.Job)
		assert.Equal(t, w.verdict, r.Verdict, "%s: %+v", r.Job, r.Verify)
		require.NotNil(t, r.Reward, r.Job)
		assert.Equal(t, w.reward, *r.Reward, r.Job)
		require.NotNil(t, r.Verify, r.Job)
		assert.Contains(t, r.Verify.Output, w.output, r.Job)
	}
	assert.Contains(t, string(out), "solved 1 of 3 graded jobs (2 failed, 0 verifier errors)")

	// One line per instance: app__1 takes the passing attempt.
	fh, err := os.Open(preds)
	require.NoError(t, err)
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	got := map[string]string{}
	for sc.Scan() {
		var p map[string]string
		require.NoError(t, json.Unmarshal(sc.Bytes(), &p), sc.Text())
		_, dup := got[p["instance_id"]]
		assert.False(t, dup, "one line per instance: %s", p["instance_id"])
		got[p["instance_id"]] = p["model_patch"]
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, 2)
	assert.Contains(t, got["app__1"], "+echo 2", "the attempt that passed")
}
