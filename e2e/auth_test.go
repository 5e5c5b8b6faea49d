package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// TestRejectedKeyIsAuth: a key the model API rejects (401) is an
// authentication failure (exit 5), reported after at most the runner's
// default CLI retry budget (outpost.DefaultCLIRetries) instead of the CLIs'
// own defaults (Claude Code: 10 retries, about 3 minutes). Copilot CLI has
// no retry setting; it gives up after 2 retries of a 401 by itself. The
// time each took is logged (figures: BENCHMARKS.md).
func TestRejectedKeyIsAuth(t *testing.T) {
	testenv.Short(t)
	retries := outpost.DefaultCLIRetries
	for _, c := range []struct {
		name    string
		a       adapters.Adapter
		key     string
		maxReqs int
	}{
		{"claude", claude.New(), "sk-ant-api03-MARK-rejected", retries + 1},
		{"codex", codex.New(), outposttest.PlaceholderKey, retries + 1},
		{"copilot", copilot.New(), outposttest.PlaceholderKey, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := hostEnv(t, testenv.CLI(t, c.name))
			srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnauthorized))
			sb := lease(t, e)
			start := time.Now()
			_, err := harness.Run(context.Background(), harness.Turn{Adapter: c.a, Sandbox: sb,
				Input: adapters.Input{Prompt: "hi", MaxRetries: &retries,
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: c.key}},
				Limits: harness.Limits{Deadline: 5 * time.Minute}})
			took := time.Since(start)
			reqs := len(srv.ModelRequests())
			t.Logf("%s: rejected key reported after %s and %d requests: %v", c.name, took.Round(10*time.Millisecond), reqs, err)
			require.Error(t, err)
			assert.True(t, outposterr.IsAuth(err), "an authentication failure: %v", err)
			assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
			assert.LessOrEqual(t, reqs, c.maxReqs, "the CLI's retries are bounded")
			assert.GreaterOrEqual(t, reqs, 1)
		})
	}
}

// BenchmarkRejectedKey times a turn whose key the model API rejects (401),
// per CLI, with the runner's default retry budget and with the CLI's own
// default (which takes minutes for Claude Code: run with -benchtime=1x).
func BenchmarkRejectedKey(b *testing.B) {
	def := outpost.DefaultCLIRetries
	for _, c := range []struct {
		name string
		a    adapters.Adapter
		key  string
	}{
		{"claude", claude.New(), "sk-ant-api03-rejected"},
		{"codex", codex.New(), outposttest.PlaceholderKey},
		{"copilot", copilot.New(), outposttest.PlaceholderKey},
	} {
		for _, budget := range []struct {
			name    string
			retries *int
		}{{"outpost-default", &def}, {"cli-default", nil}} {
			b.Run(c.name+"/"+budget.name, func(b *testing.B) {
				bin := testenv.CLI(b, c.name)
				srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioUnauthorized))
				require.NoError(b, err)
				defer srv.Close()
				p := host.New(host.Options{TempDir: b.TempDir(),
					Env: map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin", "TZ": "UTC"}})
				for b.Loop() {
					_, err := harness.Run(context.Background(), harness.Turn{Adapter: c.a, Provider: p,
						Input: adapters.Input{Prompt: "hi", MaxRetries: budget.retries,
							Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: c.key}},
						Limits: harness.Limits{Deadline: 10 * time.Minute}})
					if !outposterr.IsAuth(err) {
						b.Fatalf("not an authentication failure: %v", err)
					}
				}
				b.ReportMetric(float64(len(srv.ModelRequests()))/float64(b.N), "requests/op")
			})
		}
	}
}
