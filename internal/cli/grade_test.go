package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestGradeInterruptReleasesLeases: SIGINT while verifiers run stops the
// grading like a batch's: exit 130, the running verifiers killed and their
// host sandbox homes removed, and the command that continues printed.
func TestGradeInterruptReleasesLeases(t *testing.T) {
	testenv.Short(t)
	dir := t.TempDir()
	task := filepath.Join(dir, "task")
	require.NoError(t, os.MkdirAll(task, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "app.sh"), []byte("echo 1\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "task"}} {
		git := exec.Command("git", args...)
		git.Dir = task
		git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := git.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	pids := filepath.Join(dir, "pids")
	require.NoError(t, os.MkdirAll(pids, 0o777))
	verify := `{"command":"echo $$ > ` + pids + `/$(basename $(mktemp -u)); exec sleep 600"}`
	tasks := `{"id":"a","source":{"repo":"task","commit":"main"},"verify":` + verify + "}\n" +
		`{"id":"b","source":{"repo":"task","commit":"main"},"verify":` + verify + "}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tasks.jsonl"), []byte(tasks), 0o600))
	preds := `{"instance_id":"a","model_patch":""}` + "\n" + `{"instance_id":"b","model_patch":""}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "preds.jsonl"), []byte(preds), 0o600))

	tmp := t.TempDir()
	cmd, _, stderr := startOutpost(t, dir, tmp, "grade", "preds.jsonl", "--tasks", "tasks.jsonl", "--out", "graded",
		"--sandbox", "host", "--concurrency", "2")
	started := func() []int {
		entries, _ := os.ReadDir(pids)
		var out []int
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(pids, e.Name()))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				out = append(out, pid)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(started()) == 2 }, 60*time.Second, 50*time.Millisecond,
		"both verifiers started: %s", stderr)
	require.Len(t, hostHomes(t, tmp), 2, "one lease per running verifier")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "stderr: %s", stderr)
		assert.Equal(t, 130, exit.ExitCode(), "stderr: %s", stderr)
	case <-time.After(45 * time.Second):
		t.Fatalf("outpost grade did not exit after SIGINT")
	}
	assert.Empty(t, hostHomes(t, tmp), "no lease is left")
	for _, pid := range started() {
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "verifier %d is gone", pid)
	}
	assert.Contains(t, stderr.String(), "interrupted: 0 attempts graded this run; to continue, run:")
	assert.Contains(t, stderr.String(), "grade preds.jsonl --concurrency=2 --sandbox=host --tasks=tasks.jsonl --out=graded")
}

// TestGradeTaskDirectory: --tasks takes a task directory as batch does —
// its tests/test.sh is the verifier, its id the instance — and a task
// without an agent or a prompt given still grades.
func TestGradeTaskDirectory(t *testing.T) {
	testenv.Short(t)
	dir := t.TempDir()
	task := filepath.Join(dir, "tasks", "app")
	ws := filepath.Join(task, "workspace")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "instruction.md"), []byte("Make app.sh print 2.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "task.json"), []byte(`{"verify":{"timeout":"1m"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "tests", "test.sh"),
		[]byte("[ \"$(sh app.sh)\" = 2 ] || { echo \"want 2, got $(sh app.sh)\"; exit 1; }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "app.sh"), []byte("echo 1\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "task"}} {
		git := exec.Command("git", args...)
		git.Dir = ws
		git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := git.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	patch := func(to string) string {
		return `"diff --git a/app.sh b/app.sh\n--- a/app.sh\n+++ b/app.sh\n@@ -1 +1 @@\n-echo 1\n+echo ` + to + `\n"`
	}
	preds := `{"instance_id":"app","model_patch":` + patch("2") + "}\n" + `{"instance_id":"app","model_patch":` + patch("3") + "}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "preds.jsonl"), []byte(preds), 0o600))
	graded := filepath.Join(dir, "graded")
	out := execute(t, "", map[string]string{"PATH": os.Getenv("PATH")}, "grade", filepath.Join(dir, "preds.jsonl"), "--tasks", filepath.Join(dir, "tasks"),
		"--out", graded, "--sandbox", "host")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stderr, "solved 1 of 2 graded jobs (1 failed, 0 verifier errors)")
	b, err := os.ReadFile(filepath.Join(graded, "results.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"job":"app#1"`)
	assert.Contains(t, string(b), "want 2, got 3", "app#2 was graded by the task's tests/test.sh")
}
