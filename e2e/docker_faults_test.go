package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

func TestMain(m *testing.M) {
	if fakecli.IsChild() {
		fakecli.Main()
	}
	os.Exit(m.Run())
}

const fakeInContainer = "/opt/outpost/bin/fake-agent"

// fakeDocker returns a Docker provider, its run id, and a turn template that
// runs the fake CLI (this test binary, mounted read-only) in cold leases.
func fakeDocker(t *testing.T) (*docker.Provider, string, harness.Turn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := "e2e-fault-" + uuid.NewString()
	p, err := docker.New(ctx, docker.Options{Network: "none", RunID: run, Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	if _, err := p.Client().ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "image "+docker.DefaultImage)
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		assert.Zero(t, labelled(t, p, run), "containers left for run %s", run)
		_ = p.Close()
	})
	exe, err := os.Executable()
	require.NoError(t, err)
	return p, run, harness.Turn{
		Adapter:  fakecli.New(fakeInContainer),
		Provider: p,
		Spec: sandbox.Spec{Mounts: []sandbox.Mount{{Source: exe, Target: fakeInContainer, ReadOnly: true}},
			MemoryBytes: 256 << 20},
		KeepEvents: true, Limits: harness.Limits{Deadline: time.Minute, Settle: 500 * time.Millisecond, KillGrace: 500 * time.Millisecond},
	}
}

func labelled(t *testing.T, p *docker.Provider, run string) int {
	list, err := p.Client().ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRun+"="+run))})
	require.NoError(t, err)
	return len(list)
}

func TestDockerFaults(t *testing.T) {
	testenv.Short(t)
	p, run, base := fakeDocker(t)

	t.Run("CLI killed mid-turn", func(t *testing.T) {
		turn := base
		turn.Input.Prompt = "emit {\"type\":\"text\",\"text\":\"working\"}\nhang"
		var sb sandbox.Sandbox
		sb, err := p.Acquire(context.Background(), turn.Spec)
		require.NoError(t, err)
		defer sb.Release(context.Background())
		turn.Sandbox = sb
		turn.OnEvent = func(ev adapters.Event) {
			if ev.Kind == adapters.KindText {
				k, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"pkill", "-KILL", "-f", "fake-agent"}})
				if err == nil {
					_, _ = k.Wait()
					_ = k.Close()
				}
			}
		}
		res, err := harness.Run(context.Background(), turn)
		require.Error(t, err)
		assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
		assert.True(t, res.Exit.Signal == "SIGKILL" || res.Exit.Code == 137, "exit %+v", res.Exit)
	})

	t.Run("CLI ignores SIGTERM", func(t *testing.T) {
		turn := base
		turn.Input.Prompt = "trap-term\nemit {\"type\":\"text\",\"text\":\"stubborn\"}\nhang"
		sb, err := p.Acquire(context.Background(), turn.Spec)
		require.NoError(t, err)
		defer sb.Release(context.Background())
		turn.Sandbox = sb
		ctx, cancel := context.WithCancel(context.Background())
		turn.OnEvent = func(ev adapters.Event) {
			if ev.Kind == adapters.KindText {
				cancel()
			}
		}
		res, err := harness.Run(ctx, turn)
		require.Error(t, err)
		assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
		assert.Equal(t, "SIGKILL", res.Exit.Signal, "exit %+v", res.Exit)
		assert.NotContains(t, inside(t, sb, "ps", "-eo", "args"), "fake-agent")
	})

	t.Run("CLI lingers after its final event", func(t *testing.T) {
		turn := base
		turn.Input.Prompt = "emit {\"type\":\"result\",\"text\":\"done\"}\nemit {\"type\":\"finished\",\"ok\":true}\nhang"
		res, err := harness.Run(context.Background(), turn)
		require.NoError(t, err)
		assert.Equal(t, "done", res.Text)
		assert.Contains(t, strings.Join(res.Warnings, " "), "settle")
	})

	t.Run("OOM killed", func(t *testing.T) {
		turn := base
		turn.Spec.MemoryBytes = 64 << 20
		turn.Input.Prompt = "emit {\"type\":\"text\",\"text\":\"allocating\"}\nalloc 512\nemit {\"type\":\"finished\",\"ok\":true}"
		res, err := harness.Run(context.Background(), turn)
		require.Error(t, err)
		assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
		assert.True(t, res.Exit.OOMKilled, "exit %+v", res.Exit)
		assert.Contains(t, err.Error(), "out of memory")
	})

	t.Run("50 sequential cold turns leave nothing", func(t *testing.T) {
		turn := base
		turn.Input.Prompt = "emit {\"type\":\"result\",\"text\":\"ok\"}\nemit {\"type\":\"finished\",\"ok\":true}"
		for i := range 50 {
			_, err := harness.Run(context.Background(), turn)
			require.NoError(t, err, "turn %d", i)
		}
		// A released container is removed by the engine after its Release
		// returned; the provider waits for that.
		require.NoError(t, p.AwaitRemovals(context.Background()))
		assert.Zero(t, labelled(t, p, run))
	})
}

// inside runs argv in sb and returns its stdout.
func inside(t *testing.T, sb sandbox.Sandbox, argv ...string) string {
	t.Helper()
	pr, err := sb.Exec(context.Background(), sandbox.Command{Args: argv})
	require.NoError(t, err)
	defer pr.Close()
	out := readAll(pr)
	_, _ = pr.Wait()
	return out
}
