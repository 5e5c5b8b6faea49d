package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

func requireDocker(t *testing.T) {
	t.Helper()
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
}

func TestGCAndImageUnreachableEngine(t *testing.T) {
	env := map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "none.sock")}
	r := execute(t, "", env, "gc", "--dry-run")
	assert.Equal(t, int(ExitSandbox), r.code, r.stderr)
	assert.Contains(t, r.stderr, "dockerd")

	r = execute(t, "", nil, "image", "build", "--dir", t.TempDir())
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "no Dockerfile")
}

func TestGCDryRun(t *testing.T) {
	requireDocker(t)
	r := execute(t, "", nil, "gc", "--dry-run")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.NotEmpty(t, r.stdout)
}

func TestImageBuild(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN echo built > /outpost-built\n"), 0o644))
	tag := "outpost/clitest:dev"
	r := execute(t, "", nil, "image", "build", "--dir", dir, "--tag", tag)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, tag)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.ImageInspect(context.Background(), tag)
	require.NoError(t, err)
	_, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})

	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN exit 3\n"), 0o644))
	r = execute(t, "", nil, "image", "build", "--dir", dir, "--tag", tag)
	assert.Equal(t, int(ExitSandbox), r.code, r.stderr)
}

func TestDoctor(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	testenv.CLI(t, "claude") // the registry is reachable where the CLIs could be installed
	r := execute(t, "", map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}, "doctor", "--download")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{"docker engine", "image outpost/base:dev", "claude protocol fixtures", "claude CLI flags",
		"codex CLI flags", "copilot protocol fixtures", "copilot CLI flags", "fake protocol fixtures"} {
		assert.Contains(t, r.stdout, "pass  "+want)
	}
	assert.NotContains(t, r.stdout, "FAIL")

	r = execute(t, "", map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "none.sock")}, "doctor")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stdout, "FAIL  docker engine")
}

// TestRunDriverDocker: a spec-defined driver runs in the default Docker
// sandbox exactly as on the host; the image provides its binary (sh) and
// the workspace its script.
func TestRunDriverDocker(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	ws := t.TempDir()
	// The lease user (not root) must be able to write the workspace, or
	// the turn fails as configuration before the CLI starts.
	require.NoError(t, os.Chmod(ws, 0o777))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "lines.json"), []byte(`{"id":"lines","binary":"sh",
		"args":["lines.sh"],"stdin":"${input.prompt}","requires_final":true,"env":{"LINES_KEY":"${secrets.LINES_KEY}"},"secrets":["LINES_KEY"],
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}},
		{"match":{"t":"end"},"event":"final","fields":{"text":"v"}}]},
		"failures":{"exit_codes":{"4":"unavailable"}}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "lines.sh"), []byte(`p=$(cat)
[ "$p" = down ] && exit 4
echo '{"t":"id","v":"c-1"}'
echo '{"t":"end","v":"in '$(hostname)' as '$(id -u)': '$p' key='${#LINES_KEY}'"}'
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("LINES_KEY=MARK-dk-secret\n"), 0o600))
	t.Chdir(ws)
	r := execute(t, "", nil, "run", "--agent", "lines", "--no-store", "--workspace", ws, "--json", "hello")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"conversation":"c-1"`)
	assert.Regexp(t, `"text":"in [0-9a-f]{12} as [1-9][0-9]*: hello key=14"`, r.stdout, "ran in a container, not as root, with the secret set")
	assert.NotContains(t, r.stdout+r.stderr, "MARK-dk-secret")
	r = execute(t, "", nil, "run", "--agent", "lines", "--no-store", "--workspace", ws, "down")
	assert.Equal(t, int(ExitUnavailable), r.code, r.stdout+r.stderr)
}
