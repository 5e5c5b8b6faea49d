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
	"github.com/outpost-dev/outpost/outposterr"
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
	assert.Equal(t, outposterr.ExitSandbox, r.code, r.stderr)
	assert.Contains(t, r.stderr, "dockerd")

	r = execute(t, "", nil, "image", "build", "--dir", t.TempDir())
	assert.Equal(t, outposterr.ExitConfiguration, r.code)
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
	assert.Equal(t, outposterr.ExitSandbox, r.code, r.stderr)
}

func TestDoctor(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	testenv.CLI(t, "claude") // the registry is reachable where the CLIs could be installed
	r := execute(t, "", map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}, "doctor", "--download")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{"docker engine", "image outpost/base:dev", "claude protocol fixtures", "claude CLI flags", "codex CLI flags"} {
		assert.Contains(t, r.stdout, "pass  "+want)
	}
	assert.NotContains(t, r.stdout, "FAIL")

	r = execute(t, "", map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "none.sock")}, "doctor")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stdout, "FAIL  docker engine")
}
