package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestEvalSWEGrading: real CLIs offline in Docker, graded SWE-bench style
// in Docker verifier leases: a test patch adds the fail-to-pass test after
// the attempt's patch, and a test runner's pytest -rA lines decide (it
// always exits 1). The correct fix passes; an attempt that plants a
// trivial version of the test patch's file is graded on the real test and
// fails, without an error.
func TestEvalSWEGrading(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	task := filepath.Join(root, "task")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	for name, data := range map[string]string{
		"app.sh":            "echo 1\n",
		"tests/test_old.sh": "[ \"$(sh app.sh)\" -ge 1 ]\n",
		"tests/run.sh": "for f in tests/test_*.sh; do\n  if sh \"$f\"; then echo \"PASSED $f::main\"; else echo \"FAILED $f::main - exit $?\"; fi\ndone\n" +
			"echo 'FAILED tests/unrelated.sh::main - always'\nexit 1\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(task, name), []byte(data), 0o644))
	}
	gitCmd(t, task, "init", "-q", "-b", "main")
	gitCmd(t, task, "add", "-A")
	gitCmd(t, task, "commit", "-q", "-m", "task")

	verify := map[string]any{"command": "sh tests/run.sh", "timeout": "2m", "parser": "pytest",
		"fail_to_pass": []string{"tests/test_new.sh::main"}, "pass_to_pass": []string{"tests/test_old.sh::main"},
		"test_patch": "diff --git a/tests/test_new.sh b/tests/test_new.sh\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_new.sh\n" +
			"@@ -0,0 +1 @@\n+[ \"$(sh app.sh)\" = 2 ]\n"}
	src := map[string]any{"repo": "task", "commit": "main"}
	var b strings.Builder
	for _, j := range []map[string]any{
		{"id": "fixed", "agent": "claude", "prompt": "MARK-fixed " + outposttest.RunDirective("echo 'echo 2' > app.sh"), "source": src, "verify": verify},
		{"id": "tamper", "agent": "codex", "prompt": "MARK-tamper " + outposttest.RunDirective("echo 'exit 0' > tests/test_new.sh"), "source": src, "verify": verify},
	} {
		line, err := json.Marshal(j)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	jobsFile := filepath.Join(root, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobsFile, []byte(b.String()), 0o600))
	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(outpost, "batch", jobsFile, "--results", results, "--offline", "--no-store", "--concurrency", "2")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "verdicts do not change the exit code: %s", out)
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no container left, the verifiers' included")

	recs := readRecords(t, results)
	require.Len(t, recs, 2, string(out))
	want := map[string]struct {
		verdict harness.Verdict
		f2p     grading.Status
	}{
		"fixed":  {harness.VerdictPass, grading.Passed},
		"tamper": {harness.VerdictFail, grading.Failed},
	}
	for _, r := range recs {
		w := want[r.Job]
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		assert.Equal(t, w.verdict, r.Verdict, "%s: %+v", r.Job, r.Verify)
		require.NotNil(t, r.Verify, r.Job)
		assert.Empty(t, r.Verify.Error, r.Job)
		require.NotNil(t, r.Verify.ExitCode, r.Job)
		assert.Equal(t, 1, *r.Verify.ExitCode, "%s: the runner exits 1 whatever the tests", r.Job)
		require.NotNil(t, r.Verify.Grading, r.Job)
		assert.Equal(t, []grading.TestOutcome{
			{Name: "tests/test_new.sh::main", Group: grading.FailToPass, Status: w.f2p},
			{Name: "tests/test_old.sh::main", Group: grading.PassToPass, Status: grading.Passed},
		}, r.Verify.Grading.Tests, r.Job)
	}
	assert.Contains(t, string(out), "solved 1 of 2 graded jobs (1 failed, 0 verifier errors)")
}
