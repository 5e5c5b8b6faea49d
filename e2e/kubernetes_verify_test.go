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

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestKubernetesVerify: outpost batch --sandbox kubernetes runs real
// Claude Code offline in a pod against the scripted server, twice on a
// task from a git source: a correct fix, a wrong one, and one that
// rewrites the hidden test and the test patch's and plants a reward file.
// Each attempt is graded in a pod of its own on tests the agent never saw
// and a test patch: the agent
// leaves its pod's host name in its patch and a file outside the
// workspace, and the verifier checks it runs in another pod, sees no such
// file and is on the pod network (not the node's, which the agent's pod
// shares to reach the scripted server). Pass with reward 1, fail with
// reward 0 twice (the real tests win); no pod or Secret is left.
func TestKubernetesVerify(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	bin := buildOutpost(t)
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
	// The hidden check: another pod than the agent's, none of the agent's
	// files outside the patch, the pod network, then the answer.
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "check.sh"), []byte(`me=$(hostname)
agent=$(cat agent-host.txt)
echo "verifier pod $me, agent pod $agent"
[ -n "$agent" ] && [ "$me" != "$agent" ] || { echo "same pod as the agent"; exit 1; }
[ ! -e /tmp/outpost-agent-left ] || { echo "the agent's file outside the patch is here"; exit 1; }
case "$me" in outpost-*) ;; *) echo "not the pod network: $me"; exit 1;; esac
sh tests/extra.sh || { echo "the test patch's test failed"; exit 1; }
[ "$(sh app.sh)" = 2 ] || { echo "want 2, got $(sh app.sh)"; exit 1; }
echo verified
`), 0o644))

	// The test patch adds tests/extra.sh.
	testPatch := "diff --git a/tests/extra.sh b/tests/extra.sh\nnew file mode 100644\n--- /dev/null\n+++ b/tests/extra.sh\n@@ -0,0 +1 @@\n+[ \"$(sh app.sh)\" != 1 ]\n"
	verify := map[string]any{"command": "sh tests/check.sh", "files": "hidden", "timeout": "2m", "test_patch": testPatch}
	src := map[string]any{"repo": "task", "commit": "main"}
	var b strings.Builder
	for _, j := range []struct{ id, edit string }{
		{"fixed", "echo 'echo 2' > app.sh"},
		{"wrong", "echo 'echo 3' > app.sh"},
		// Rewrites the hidden test and the test patch's, plants a reward.
		{"tamper", "echo 'echo verified' > tests/check.sh; echo 'exit 0' > tests/extra.sh; echo 1 > reward"},
	} {
		line, err := json.Marshal(map[string]any{"id": j.id, "agent": "claude", "source": src, "verify": verify,
			"prompt": "MARK-kv-" + j.id + " " + outposttest.RunDirective(
				"hostname > agent-host.txt; touch /tmp/outpost-agent-left; "+j.edit)})
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	jobsFile := filepath.Join(root, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobsFile, []byte(b.String()), 0o600))
	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(bin, "batch", jobsFile, "--results", results, "--sandbox", "kubernetes", "--offline", "--no-store",
		"--concurrency", "3")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "OUTPOST_STATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "verdicts do not change the exit code: %s", out)
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "no pod or Secret left, the verifiers' included")

	recs := readRecords(t, results)
	require.Len(t, recs, 3, string(out))
	want := map[string]struct {
		verdict harness.Verdict
		reward  float64
		output  string
	}{
		"fixed":  {harness.VerdictPass, 1, "verified"},
		"wrong":  {harness.VerdictFail, 0, "want 2, got 3"},
		"tamper": {harness.VerdictFail, 0, "the test patch's test failed"},
	}
	for _, r := range recs {
		w := want[r.Job]
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		require.NotNil(t, r.Patch, r.Job)
		assert.NotEmpty(t, r.Patch.Files, "%s: the agent's edit is in its patch", r.Job)
		require.NotNil(t, r.Verify, r.Job)
		assert.Equal(t, w.verdict, r.Verdict, "%s: %+v", r.Job, r.Verify)
		require.NotNil(t, r.Reward, r.Job)
		assert.Equal(t, w.reward, *r.Reward, r.Job)
		assert.Contains(t, r.Verify.Output, w.output, r.Job)
		assert.Contains(t, r.Verify.Output, "verifier pod outpost-", r.Job)
	}
	assert.Contains(t, string(out), "solved 1 of 3 graded jobs (2 failed, 0 verifier errors)")
}
