package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/source"
)

// TestVerifyKinds grades attempts' patches with Runner.Verify in
// verifier leases of the docker and podman kinds: a fix passes (reward 1),
// a wrong fix fails (reward 0), and a patch that rewrites the hidden test,
// the test patch's test and plants reward files in the workspace fails
// too (only the patch crosses; the test files and the test patch win, and
// $OUTPOST_REWARD_FILE is outside the workspace). The verifier sees no
// network but loopback, and no container is left.
func TestVerifyKinds(t *testing.T) {
	testenv.Short(t)
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
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "check.sh"), []byte(`nets=$(ls /sys/class/net | tr '\n' ' ')
[ "$nets" = "lo " ] || { echo "networks: $nets"; exit 1; }
sh tests/extra.sh || { echo "the test patch's test failed"; exit 1; }
[ "$(sh app.sh)" = 2 ] || { echo "want 2, got $(sh app.sh)"; exit 1; }
echo verified
`), 0o644))
	// The test patch adds tests/extra.sh.
	testPatch := "diff --git a/tests/extra.sh b/tests/extra.sh\nnew file mode 100644\n--- /dev/null\n+++ b/tests/extra.sh\n@@ -0,0 +1 @@\n+[ \"$(sh app.sh)\" != 1 ]\n"

	// patch is the diff of the task after edit (a map of path to content).
	patch := func(edit map[string]string) []byte {
		dir := filepath.Join(t.TempDir(), "w")
		gitCmd(t, root, "clone", "-q", task, dir)
		for p, c := range edit {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644))
		}
		gitCmd(t, dir, "add", "-A")
		return []byte(gitCmd(t, dir, "diff", "--cached", "--binary") + "\n")
	}
	attempts := []struct {
		name    string
		patch   []byte
		verdict harness.Verdict
		reward  float64
		output  string
	}{
		{"fix", patch(map[string]string{"app.sh": "echo 2\n"}), harness.VerdictPass, 1, "verified"},
		{"wrong", patch(map[string]string{"app.sh": "echo 3\n"}), harness.VerdictFail, 0, "want 2, got 3"},
		{"tamper", patch(map[string]string{"tests/check.sh": "echo verified; echo 1 > \"$OUTPOST_REWARD_FILE\"\n",
			"tests/extra.sh": "exit 0\n", "reward": "1\n", ".outpost/reward": "1\n"}),
			harness.VerdictFail, 0, "the test patch's test failed"},
	}
	job := batch.Job{ID: "task", Agent: "claude", Prompt: "fix it", Source: &source.Spec{Repo: task, Commit: "main"},
		Verify: &batch.VerifySpec{Command: "sh tests/check.sh", Files: filepath.Join(root, "hidden"), TestPatch: testPatch}}

	for _, kind := range []string{"docker", "podman"} {
		t.Run(kind, func(t *testing.T) {
			getenv := os.Getenv
			host := ""
			switch kind {
			case "docker":
				cli, err := docker.NewClient("")
				require.NoError(t, err)
				_, err = cli.Ping(context.Background())
				_ = cli.Close()
				if err != nil {
					testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
				}
			case "podman":
				host = testenv.PodmanHost()
				getenv = func(k string) string {
					if k == "CONTAINER_HOST" {
						return host
					}
					return os.Getenv(k)
				}
				otherEngine(t, docker.Options{Host: host}, testenv.RequirePodmanEnv, "Podman API service")
			}
			r, err := outpost.New(context.Background(), outpost.Options{Project: workspace(t), NoStore: true, Getenv: getenv,
				Sandbox: outpost.SandboxOptions{Kind: kind}})
			require.NoError(t, err)
			defer r.Close()
			for _, a := range attempts {
				v := r.Verify(context.Background(), job, a.patch)
				require.NotNil(t, v, a.name)
				assert.Equal(t, a.verdict, v.Verdict, "%s: %+v", a.name, v)
				if assert.NotNil(t, v.Reward, a.name) {
					assert.Equal(t, a.reward, *v.Reward, a.name)
				}
				assert.Contains(t, v.Output, a.output, a.name)
			}
			// Released verifier containers may still be being removed by
			// the engine; the runner's Close waits for that.
			r.Close()
			cli, err := docker.NewClient(host)
			require.NoError(t, err)
			defer cli.Close()
			assert.Zero(t, owned(t, cli, os.Getpid()), "no verifier container left on %s", kind)
		})
	}
}
