package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// requirePodman skips (fails with OUTPOST_REQUIRE_PODMAN=1) without the
// Podman API service of scripts/engines-setup.sh.
func requirePodman(t *testing.T) *docker.Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := docker.New(ctx, docker.Options{Host: testenv.PodmanHost(), Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequirePodmanEnv, "Podman API service ("+err.Error()+")")
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func countManaged(t *testing.T, p *docker.Provider) int {
	t.Helper()
	// This process's leases only: other test binaries (go test runs
	// packages in parallel) use the same service at the same time.
	cs, err := p.Client().ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelManaged+"=true"),
			filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(os.Getpid())))})
	require.NoError(t, err)
	return len(cs)
}

// TestRunPodman: `outpost run --sandbox podman` finds the service
// (CONTAINER_HOST here), runs a driver in a container there with the
// workspace bind-mounted, and leaves no container behind.
func TestRunPodman(t *testing.T) {
	testenv.Short(t)
	p := requirePodman(t)
	assert.Equal(t, "podman", p.Engine())
	before := countManaged(t, p)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777)) // leases of a root host run as uid 1000
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "lines.json"), []byte(`{"id":"lines","binary":"sh",
		"args":["lines.sh"],"stdin":"${input.prompt}","requires_final":true,
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}},
		{"match":{"t":"end"},"event":"final","fields":{"text":"v"}}]}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "lines.sh"), []byte(`p=$(cat)
echo '{"t":"id","v":"c-1"}'
echo "$p from podman" > answer.txt
echo '{"t":"end","v":"in '$(cat /proc/1/comm)' as '$(id -u)': '$p'"}'
`), 0o644))
	t.Chdir(ws)
	env := map[string]string{"CONTAINER_HOST": testenv.PodmanHost()}
	r := execute(t, "", env, "run", "--sandbox", "podman", "--agent", "lines", "--no-store", "--workspace", ws, "--json", "hello")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"conversation":"c-1"`)
	assert.Regexp(t, `"text":"in (catatonit|podman-init) as [1-9][0-9]*: hello"`, r.stdout, "ran under Podman's init, not as root")
	b, err := os.ReadFile(filepath.Join(ws, "answer.txt"))
	require.NoError(t, err, "the workspace is bind-mounted")
	assert.Equal(t, "hello from podman\n", string(b))
	assert.Equal(t, before, countManaged(t, p), "no container left")

	r = execute(t, "", env, "doctor")
	assert.Contains(t, r.stdout, "pass  podman service")
	assert.Contains(t, r.stdout, "podman, API")
}
