package outpost_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/source"
)

// netEngine is an engine whose provider refuses every lease, naming the
// network it was asked for; podEngine is one that cannot go without a
// network ([sandbox.Unnetworked]), as a Kubernetes engine.
type netEngine struct{}

func (netEngine) Delivery() sandbox.Delivery { return sandbox.Delivery{Mode: sandbox.DeliverCopy} }
func (netEngine) Lease(*sandbox.CLI, string) (sandbox.Provider, sandbox.Spec, error) {
	// The agents' network, as an offline runner's Kubernetes engine has it.
	return netProvider{}, sandbox.Spec{Network: "host"}, nil
}
func (netEngine) Gateway() sandbox.Route { return sandbox.Route{} }
func (netEngine) Close()                 {}

type podEngine struct{ netEngine }

func (podEngine) OfflineNetwork() string { return "pod" }

type netProvider struct{}

func (netProvider) Name() string { return "net" }
func (netProvider) Acquire(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errors.New("network=" + spec.Network)
}

// A verifier's lease reaches nothing: network "none", or what an engine
// that cannot go without a network offers instead (never the agents'
// network); a verifier's own network wins.
func TestVerifierNetwork(t *testing.T) {
	repo, commit := oneCommitRepo(t, map[string]string{"a.txt": "base\n"})
	for _, c := range []struct {
		name   string
		engine sandbox.Engine
		verify string
		want   string
	}{
		{"none", netEngine{}, "", "network=none"},
		{"unnetworked", podEngine{}, "", "network=pod"},
		{"named", podEngine{}, "host", "network=host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runnerOn(t, "net", c.engine)
			v := r.Verify(context.Background(), batch.Job{ID: "j", Agent: "fake", Prompt: "p",
				Source: &source.Spec{Repo: repo, Commit: commit},
				Verify: &batch.VerifySpec{Command: "true", Network: c.verify}}, nil)
			require.NotNil(t, v)
			assert.Equal(t, harness.VerdictError, v.Verdict)
			assert.Contains(t, v.Error, c.want)
		})
	}
}

// resEngine hands out leases whose provider refuses every lease, naming
// the image and limits it was asked for; its delivery says whether it is
// the host sandbox's kind.
type resEngine struct{ mode sandbox.DeliveryMode }

func (e resEngine) Delivery() sandbox.Delivery { return sandbox.Delivery{Mode: e.mode} }
func (resEngine) Lease(*sandbox.CLI, string) (sandbox.Provider, sandbox.Spec, error) {
	return resProvider{}, sandbox.Spec{Image: "base"}, nil
}
func (resEngine) Gateway() sandbox.Route { return sandbox.Route{} }
func (resEngine) Close()                 {}

type resProvider struct{}

func (resProvider) Name() string { return "res" }
func (resProvider) Acquire(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, fmt.Errorf("image=%s cpus=%g memory=%d pids=%d", spec.Image, spec.CPUs, spec.MemoryBytes, spec.Pids)
}

// A verifier's lease takes the verifier's image, else the job's, and the
// job's limits; the host sandbox refuses an image and leaves the limits
// out.
func TestVerifierResources(t *testing.T) {
	repo, commit := oneCommitRepo(t, map[string]string{"a.txt": "base\n"})
	for _, c := range []struct {
		name        string
		mode        sandbox.DeliveryMode
		job, verify string // images
		want        string
	}{
		{"isolated", sandbox.DeliverCopy, "job", "", "image=job cpus=1.5 memory=1024 pids=64"},
		{"verifier's image", sandbox.DeliverCopy, "job", "ver", "image=ver cpus=1.5 memory=1024 pids=64"},
		{"host leaves limits out", sandbox.DeliverHostPath, "", "", "image=base cpus=0 memory=0 pids=0"},
		{"host refuses an image", sandbox.DeliverHostPath, "job", "", "the res sandbox cannot apply image job: run in an isolated sandbox"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runnerOn(t, "res", resEngine{c.mode})
			v := r.Verify(context.Background(), batch.Job{ID: "j", Agent: "fake", Prompt: "p",
				Source: &source.Spec{Repo: repo, Commit: commit}, Image: c.job, CPUs: 1.5, Memory: 1024, Pids: 64,
				Verify: &batch.VerifySpec{Command: "true", Image: c.verify}}, nil)
			require.NotNil(t, v)
			assert.Equal(t, harness.VerdictError, v.Verdict)
			assert.Contains(t, v.Error, c.want)
		})
	}
}

// TestVerifyOnRemoteEngine: an engine that cannot see this machine's files
// (the local one, declared remote) grades a job: the verifier's lease has
// no workspace to mount, the job's source is copied in.
func TestVerifyOnRemoteEngine(t *testing.T) {
	dockerClient(t)
	repo, commit := oneCommitRepo(t, map[string]string{"a.txt": "base\n"})
	kind := docker.EndpointKind("remote", docker.Endpoint{Remote: true})
	r, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true, TempDir: t.TempDir(),
		Getenv: func(string) string { return "" }, Sandboxes: sandbox.Kinds{"remote": kind},
		Sandbox: outpost.SandboxOptions{Kind: "remote"}})
	require.NoError(t, err)
	defer r.Close()
	v := r.Verify(context.Background(), batch.Job{ID: "j", Agent: "fake", Prompt: "p",
		Source: &source.Spec{Repo: repo, Commit: commit},
		Verify: &batch.VerifySpec{Command: `test "$(cat a.txt)" = base && echo MARK-remote`}}, nil)
	require.NotNil(t, v)
	assert.Equal(t, harness.VerdictPass, v.Verdict, "%+v", v)
	assert.Contains(t, v.Output, "MARK-remote")
}

// runnerOn is a runner whose only sandbox kind, name, opens e.
func runnerOn(t *testing.T, name string, e sandbox.Engine) *outpost.Runner {
	t.Helper()
	kind := sandbox.Kind{Name: name, Open: func(context.Context, sandbox.Config) (sandbox.Engine, error) { return e, nil }}
	r, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true, TempDir: t.TempDir(),
		Getenv: func(string) string { return "" }, Sandboxes: sandbox.Kinds{name: kind},
		Sandbox: outpost.SandboxOptions{Kind: name}})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}
