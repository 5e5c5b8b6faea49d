package outpost_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/sandbox"
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
			e := c.engine
			kind := sandbox.Kind{Name: "net", Open: func(context.Context, sandbox.Config) (sandbox.Engine, error) { return e, nil }}
			r, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true, TempDir: t.TempDir(),
				Getenv: func(string) string { return "" }, Sandboxes: sandbox.Kinds{"net": kind},
				Sandbox: outpost.SandboxOptions{Kind: "net"}})
			require.NoError(t, err)
			defer r.Close()
			v := r.Verify(context.Background(), batch.Job{ID: "j", Agent: "fake", Prompt: "p",
				Source: &source.Spec{Repo: repo, Commit: commit},
				Verify: &batch.VerifySpec{Command: "true", Network: c.verify}}, nil)
			require.NotNil(t, v)
			assert.Equal(t, harness.VerdictError, v.Verdict)
			assert.Contains(t, v.Error, c.want)
		})
	}
}
