package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
)

// codexVendorDir is where the host's Codex platform tree (the native binary
// and its sibling helpers) is mounted in a Docker lease.
const codexVendorDir = "/opt/outpost/codex"

// codexVendor finds the platform tree vendor/<triple> of the host's codex:
// the npm launcher (…/@openai/codex/bin/codex.js) resolves its native binary
// from the sibling platform package (…/@openai/codex-linux-x64/vendor/<triple>/bin/codex);
// a native binary on PATH is used from its own tree.
func codexVendor(t *testing.T, bin string) string {
	t.Helper()
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	if filepath.Base(filepath.Dir(bin)) == "bin" && !strings.HasSuffix(bin, ".js") {
		return filepath.Dir(filepath.Dir(bin))
	}
	pkg := filepath.Dir(filepath.Dir(bin)) // …/@openai/codex
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(pkg), "codex-linux-*", "vendor", "*", "bin", "codex"))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(filepath.Join(pkg, "node_modules", "@openai", "codex-linux-*", "vendor", "*", "bin", "codex"))
	}
	if len(matches) == 0 {
		testenv.Missing(t, testenv.RequireCLIsEnv, "the native codex binary next to "+bin)
	}
	return filepath.Dir(filepath.Dir(matches[0]))
}

func codexEnvs(t *testing.T) []env {
	bin := testenv.CLI(t, "codex")
	d := dockerEnv(t, bin)
	// Codex needs its helpers (codex-code-mode-host, codex-resources/bwrap,
	// codex-path/rg) beside the binary: the whole platform tree is mounted.
	d.spec = sandbox.Spec{
		Mounts: []sandbox.Mount{{Source: codexVendor(t, bin), Target: codexVendorDir, ReadOnly: true}},
		Env:    map[string]string{"PATH": codexVendorDir + "/bin:/usr/local/bin:/usr/bin:/bin", "TZ": "UTC"},
	}
	return []env{hostEnv(t, bin), d}
}

// codexTurn runs one Codex turn against srv in lease sb, with one retry.
func codexTurn(t *testing.T, sb sandbox.Sandbox, srv *outposttest.Server, in adapters.Input) (*harness.Result, error) {
	t.Helper()
	in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
	if in.MaxRetries == nil {
		one := 1
		in.MaxRetries = &one
	}
	return harness.Run(context.Background(), harness.Turn{
		Adapter: codex.New(), Input: in, Sandbox: sb, KeepEvents: true,
		Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
	})
}

func TestCodex(t *testing.T) {
	testenv.Short(t)
	for _, e := range codexEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Run("ok", func(t *testing.T) {
				srv := server(t)
				res, err := codexTurn(t, lease(t, e), srv, adapters.Input{Prompt: "say MARK-ok1"})
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, "outpost ok: MARK-ok1.", res.Text)
				assert.NotEmpty(t, res.Conversation)
				assert.Positive(t, res.Usage.Input)
				assert.Positive(t, res.Usage.Reasoning)
				assert.True(t, res.Usage.Complete, "a new thread's cumulative counters are all its own")
				assert.Positive(t, res.Counts[adapters.KindReasoning])
			})
			t.Run("tool", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioTool))
				sb, ws := leaseIn(t, e)
				res, err := codexTurn(t, sb, srv, adapters.Input{Prompt: "write MARK-tool1"})
				require.NoError(t, err, "output: %s", resTail(res))
				name, content := outposttest.ToolFile("MARK-tool1")
				got, err := os.ReadFile(filepath.Join(ws, name))
				require.NoError(t, err, "the tool wrote the file in the workspace")
				assert.Equal(t, content, string(got))
				assert.Positive(t, res.Counts[adapters.KindTool])
				assert.Positive(t, res.Counts[adapters.KindToolResult])
				assert.Contains(t, res.Text, "outpost tool done")
			})
			t.Run("resume and fork", func(t *testing.T) {
				srv := server(t)
				sb := lease(t, e)
				r1, err := codexTurn(t, sb, srv, adapters.Input{Prompt: "first MARK-r1"})
				require.NoError(t, err, "output: %s", resTail(r1))
				r2, err := codexTurn(t, sb, srv, adapters.Input{Prompt: "second MARK-r2", Continue: r1.Conversation})
				require.NoError(t, err, "output: %s", resTail(r2))
				assert.Equal(t, "outpost ok: MARK-r2. remembered: MARK-r1", r2.Text, "turn 2 sees turn 1")
				assert.Equal(t, r1.Conversation, r2.Conversation)
				assert.Greater(t, r2.Usage.Reasoning, r1.Usage.Reasoning, "usage is thread-cumulative")
				r3, err := codexTurn(t, sb, srv, adapters.Input{Prompt: "branch MARK-f1", Continue: r1.Conversation, Fork: true})
				require.NoError(t, err, "output: %s", resTail(r3))
				assert.NotEqual(t, r1.Conversation, r3.Conversation, "a fork is a new thread")
				assert.Contains(t, r3.Text, "remembered: MARK-r1 MARK-r2")
			})
			t.Run("resume missing", func(t *testing.T) {
				srv := server(t)
				_, err := codexTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-m",
					Continue: "01a23600-0000-7000-8000-000000000000"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)
			})
			t.Run("quota", func(t *testing.T) {
				reset := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Hour)
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioQuota), outposttest.WithQuotaReset(reset))
				res, err := codexTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-q"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
				got, ok := outposterr.ResetAt(err)
				require.True(t, ok, "reset time known: %v", err)
				assert.True(t, reset.Equal(got), "reset %s, want %s", got, reset)
				assert.NotEmpty(t, res.Conversation)
			})
			t.Run("unavailable", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnavailable))
				res, err := codexTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-503"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
				assert.Equal(t, "http 503", outposterr.UnavailableReason(err))
				assert.Positive(t, res.Counts[adapters.KindRetry], "the CLI's own retry is a retry event")
			})
			t.Run("unauthorized", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnauthorized))
				zero := 0
				_, err := codexTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-u", MaxRetries: &zero})
				require.Error(t, err)
				reason := outposterr.AuthReason(err)
				assert.True(t, outposterr.IsAuth(err), "%v", err)
				assert.Equal(t, "invalid api key", reason)
			})
			t.Run("cancel", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				ctx, cancel := context.WithCancel(context.Background())
				res, err := harness.Run(ctx, harness.Turn{
					Adapter: codex.New(),
					Input: adapters.Input{Prompt: "MARK-cancel-" + e.name, Endpoint: &adapters.Endpoint{BaseURL: srv.URL(),
						APIKey: outposttest.PlaceholderKey}},
					Sandbox: sb, Limits: harness.Limits{KillGrace: time.Second},
					OnEvent: func(ev adapters.Event) {
						if ev.Kind == adapters.KindConversation {
							// The CLI is waiting on the hanging server now.
							go func() { time.Sleep(500 * time.Millisecond); cancel() }()
						}
					},
				})
				cancel()
				require.Error(t, err)
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
				assert.NotEmpty(t, res.Conversation)
				assert.Eventually(t, func() bool {
					return !strings.Contains(e.processes(t, sb), "exec --json --skip-git-repo-check")
				}, 10*time.Second, 200*time.Millisecond, "no codex process left running")
			})
		})
	}
}

// TestCodexLiveInput steers a running Codex turn through the harness
// (Turn.Live: `codex app-server`, turn/steer) inside host and Docker leases,
// then continues the thread with an ordinary exec turn.
func TestCodexLiveInput(t *testing.T) {
	testenv.Short(t)
	for _, e := range codexEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(150*time.Millisecond))
			sb := lease(t, e)
			zero := 0
			live := make(chan string, 1) // OnEvent runs on the goroutine that reads it
			steered := false
			res, err := harness.Run(context.Background(), harness.Turn{
				Adapter: codex.New(), Sandbox: sb, KeepEvents: true, Live: live,
				Input: adapters.Input{Prompt: "first MARK-live1", MaxRetries: &zero,
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
				Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
				OnEvent: func(ev adapters.Event) {
					if ev.Kind == adapters.KindTextDelta && !steered {
						steered = true // the first answer is streaming: the turn runs
						live <- "also MARK-live2"
					}
				},
			})
			require.NoError(t, err, "output: %s", resTail(res))
			assert.Equal(t, 1, res.Counts[adapters.KindInput], "the message was delivered")
			assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", res.Text,
				"the steered message reached the model in the same turn")
			assert.NotEmpty(t, res.Conversation)
			assert.Positive(t, res.Usage.Input)
			assert.Empty(t, res.Warnings, "app-server exited once its stdin closed")
			assert.True(t, res.Exited)

			next, err := codexTurn(t, sb, server(t), adapters.Input{Prompt: "next MARK-live3", Continue: res.Conversation})
			require.NoError(t, err, "output: %s", resTail(next))
			assert.Equal(t, res.Conversation, next.Conversation)
			assert.Contains(t, next.Text, "MARK-live1", "the live turn's thread continues with exec")
		})
	}
}
