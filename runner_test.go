package outpost_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/source"
)

// dockerClient is a client of the Docker engine the tests run against; the
// test is skipped (or fails, when Docker is required) without one, and in
// -short mode.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	testenv.Short(t)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
	return cli
}

// TestRunnerDocker is the README's library example with the default
// sandbox: a real Claude Code turn in a Docker lease (the verified CLI
// delivered by the engine's rule), then a small batch; no container of this
// process is left.
func TestRunnerDocker(t *testing.T) {
	cli := dockerClient(t)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777))

	ctx := context.Background()
	r, err := outpost.New(ctx, outpost.Options{Project: ws, Offline: true, NoStore: true, Getenv: os.Getenv})
	require.NoError(t, err)
	res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "Say hello MARK-fac1"})
	require.NoError(t, err, "%+v", res)
	assert.Equal(t, "outpost ok: MARK-fac1.", res.Text)

	recs, err := r.Batch(ctx, []batch.Job{
		{ID: "a", Agent: "claude", Prompt: "MARK-fac2"},
		{ID: "b", Agent: "codex", Prompt: "MARK-fac3"},
	}, outpost.BatchOptions{Options: batch.Options{Concurrency: 2}})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for _, rec := range recs {
		assert.True(t, rec.Outcome.OK, "%+v", rec)
		if rec.Agent == "codex" {
			assert.Equal(t, "0.169.0", rec.CLIVersion, "a CLI that prints no version reports the delivered pin")
		}
	}
	r.Close()
	r.Close() // idempotent

	left, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(os.Getpid())))})
	require.NoError(t, err)
	assert.Empty(t, left, "no container of this process is left")

	_, err = r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "after close"})
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "a closed runner runs nothing")
}

func TestRunnerRefusesBadTurnsBeforeAnySandbox(t *testing.T) {
	ctx := context.Background()
	r, err := outpost.New(ctx, outpost.Options{Project: t.TempDir(), NoStore: true,
		Getenv: func(k string) string { return map[string]string{"DOCKER_HOST": "unix:///nonexistent/docker.sock"}[k] }})
	require.NoError(t, err, "nothing is opened before the first turn")
	defer r.Close()
	_, err = r.Run(ctx, outpost.Turn{Agent: "nope", Prompt: "hi"})
	assert.ErrorContains(t, err, `unknown agent "nope"`)
	_, err = r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "  "})
	assert.ErrorContains(t, err, "empty prompt", "validated before the (unreachable) engine is opened")
	_, err = r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "hi"})
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err), "then the engine is the problem")

	_, err = outpost.New(ctx, outpost.Options{Sandbox: outpost.SandboxOptions{Kind: "vm"}, NoStore: true})
	assert.ErrorContains(t, err, `sandbox must be one of docker, host, kubernetes, podman, not "vm"`)
}

// TestRunnerRemoteEngineBatch: an engine that cannot see this machine's
// files (the local one, declared remote) runs a batch job from its
// source: no workspace is mounted, the source and the verified CLI are
// copied in.
func TestRunnerRemoteEngineBatch(t *testing.T) {
	dockerClient(t)
	repo, commit := oneCommitRepo(t, map[string]string{"a.txt": "base\n"})
	ctx := context.Background()
	r, err := outpost.New(ctx, outpost.Options{Project: t.TempDir(), Offline: true, NoStore: true, Getenv: os.Getenv,
		Sandboxes: sandbox.Kinds{"remote": docker.EndpointKind("remote", docker.Endpoint{Remote: true})},
		Sandbox:   outpost.SandboxOptions{Kind: "remote"}})
	require.NoError(t, err)
	defer r.Close()
	recs, err := r.Batch(ctx, []batch.Job{{ID: "a", Agent: "claude", Prompt: "MARK-remote",
		Source: &source.Spec{Repo: repo, Commit: commit}}}, outpost.BatchOptions{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Outcome.OK, "%+v", recs[0])
}
