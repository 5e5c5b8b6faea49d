package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestKubernetesLimits: outpost run --sandbox kubernetes applies the
// limits: an agent that forks without bound stops at the pod's pids limit
// and one that allocates without bound is killed at --memory; each turn is
// a process failure (exit 1) naming the limit, and no pod is left. A
// --pids-limit the node does not apply is a configuration error (exit 2)
// naming the kind and the flag.
func TestKubernetesLimits(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	cs := kubeClient(t, kc)
	bin := buildOutpost(t)
	dir := workspace(t)
	drivers := filepath.Join(dir, ".outpost", "drivers")
	require.NoError(t, os.MkdirAll(drivers, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(drivers, "bomb.json"), []byte(`{"id":"bomb","binary":"sh",
		"args":["bomb.sh"],"requires_final":true,
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}},
		{"match":{"t":"end"},"event":"final","fields":{"text":"v"}}]}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bomb.sh"), []byte(`echo '{"t":"id","v":"bomb-1"}'
b() { b & b & wait; }
b 2>/dev/null
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(drivers, "hog.json"), []byte(`{"id":"hog","binary":"sh",
		"args":["-c","head -c 600m /dev/zero | tail"],"output":{"mode":"text"}}`), 0o644))
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"run", "--sandbox", "kubernetes", "--no-store", "--json"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "OUTPOST_STATE_DIR="+t.TempDir())
		out, _ := cmd.CombinedOutput()
		assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "no pod or Secret is left")
		return cmd.ProcessState.ExitCode(), string(out)
	}

	code, out := run("--agent", "bomb", "--timeout", "20s", "go")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, `"class":"process"`)
	assert.Contains(t, out, `"limit":"pids"`)
	assert.Contains(t, out, "limit on processes was reached")

	code, out = run("--agent", "hog", "--memory", "128m", "go")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, `"class":"process"`)
	assert.Contains(t, out, `"limit":"memory"`)

	code, out = run("--agent", "hog", "--pids-limit", "100", "go")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "the kubernetes sandbox cannot apply a pids limit of 100 (--pids-limit)")
}
