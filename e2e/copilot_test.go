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
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
)

// copilotEnvs are the host and Docker leases for the real copilot: the
// native single-file binary is mounted read-only into the container.
func copilotEnvs(t *testing.T) []env {
	bin := testenv.CLI(t, "copilot")
	real, err := filepath.EvalSymlinks(bin)
	require.NoError(t, err)
	d := dockerEnv(t, real)
	d.spec = sandbox.Spec{
		Mounts: []sandbox.Mount{{Source: real, Target: "/opt/outpost/bin/copilot", ReadOnly: true}},
		Env:    map[string]string{"PATH": "/opt/outpost/bin:/usr/local/bin:/usr/bin:/bin"},
	}
	return []env{hostEnv(t, bin), d}
}

// copilotTurn runs one Copilot turn against srv (BYOK, Chat Completions) in lease sb.
func copilotTurn(t *testing.T, sb sandbox.Sandbox, srv *outposttest.Server, in adapters.Input) (*harness.Result, error) {
	t.Helper()
	in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
	return harness.Run(context.Background(), harness.Turn{
		Adapter: copilot.New(), Input: in, Sandbox: sb, KeepEvents: true,
		Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
	})
}

func TestCopilot(t *testing.T) {
	testenv.Short(t)
	for _, e := range copilotEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Run("ok", func(t *testing.T) {
				srv := server(t)
				res, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "say MARK-ok1"})
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, "outpost ok: MARK-ok1.", res.Text)
				assert.NotEmpty(t, res.Conversation)
				// 1.0.102 prints no usage: the harness reads the session files after exit.
				assert.True(t, res.Usage.Complete, "usage read from the session files")
				assert.Positive(t, res.Usage.Input+res.Usage.Cached)
				assert.Positive(t, res.Usage.Output)
				for _, r := range srv.ModelRequests() {
					assert.Equal(t, "/v1/chat/completions", r.Path)
				}
			})
			t.Run("tool", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioTool))
				sb, ws := leaseIn(t, e)
				res, err := copilotTurn(t, sb, srv, adapters.Input{Prompt: "write MARK-tool1"})
				require.NoError(t, err, "output: %s", resTail(res))
				name, content := outposttest.ToolFile("MARK-tool1")
				got, err := os.ReadFile(filepath.Join(ws, name))
				require.NoError(t, err, "the tool wrote the file in the workspace")
				assert.Equal(t, content, string(got))
				assert.Positive(t, res.Counts[adapters.KindTool])
				assert.Positive(t, res.Counts[adapters.KindToolResult])
				assert.Contains(t, res.Text, "outpost tool done")
			})
			t.Run("resume", func(t *testing.T) {
				srv := server(t)
				sb := lease(t, e)
				r1, err := copilotTurn(t, sb, srv, adapters.Input{Prompt: "first MARK-r1"})
				require.NoError(t, err, "output: %s", resTail(r1))
				r2, err := copilotTurn(t, sb, srv, adapters.Input{Prompt: "second MARK-r2", Continue: r1.Conversation})
				require.NoError(t, err, "output: %s", resTail(r2))
				assert.Equal(t, "outpost ok: MARK-r2. remembered: MARK-r1", r2.Text, "turn 2 sees turn 1")
				assert.Equal(t, r1.Conversation, r2.Conversation)

				// Usage after exit: the bounded session-file read, run in the
				// lease, counts only the last process (turn 2).
				cmd, ok := copilot.SessionUsageCommand(sb.Home(), r2.Conversation)
				require.True(t, ok)
				p, err := sb.Exec(context.Background(), cmd)
				require.NoError(t, err)
				events := readAll(p)
				_, _ = p.Wait()
				p.Close()
				rep, ok := copilot.ParseSessionUsage([]byte(events))
				require.True(t, ok, "usage records in events.jsonl")
				assert.True(t, rep.Complete)
				assert.Positive(t, rep.Input+rep.Cached)
				assert.Positive(t, rep.Output)
				calls := 0
				for _, r := range srv.ModelRequests() {
					if strings.Contains(r.UserText(), "MARK-r2") {
						calls++
					}
				}
				assert.Equal(t, 1, calls, "turn 2 made one model call")
				_, err = copilotTurn(t, sb, srv, adapters.Input{Prompt: "x", Continue: r1.Conversation, Fork: true})
				assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
			})
			t.Run("resume missing", func(t *testing.T) {
				srv := server(t)
				_, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-m",
					Continue: "01a23600-0000-4000-8000-000000000000"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)
			})
			t.Run("quota", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioQuota),
					outposttest.WithQuotaReset(time.Now().Add(2*time.Hour)))
				before := time.Now()
				res, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-q"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
				got, ok := outposterr.ResetAt(err)
				require.True(t, ok, "reset time known: %v", err)
				assert.WithinDuration(t, before.Add(2*time.Hour), got, 2*time.Minute)
				assert.NotEmpty(t, res.Conversation)
			})
			t.Run("no quota", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioCredits))
				_, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-q2"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
			})
			t.Run("unavailable", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnavailable))
				res, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-503"})
				require.Error(t, err)
				assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
				assert.Equal(t, "http 503", outposterr.UnavailableReason(err))
				assert.Positive(t, res.Counts[adapters.KindRetry], "the CLI's own retries are retry events")
			})
			t.Run("unauthorized", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnauthorized))
				_, err := copilotTurn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-u"})
				require.Error(t, err)
				reason := outposterr.AuthReason(err)
				assert.True(t, outposterr.IsAuth(err), "%v", err)
				assert.Equal(t, "authentication failed", reason)
			})
			t.Run("cancel", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				ctx, cancel := context.WithCancel(context.Background())
				marker := "MARK-cancel-" + e.name
				started := false
				res, err := harness.Run(ctx, harness.Turn{
					Adapter: copilot.New(),
					Input: adapters.Input{Prompt: marker, Endpoint: &adapters.Endpoint{BaseURL: srv.URL(),
						APIKey: outposttest.PlaceholderKey}},
					Sandbox: sb, Limits: harness.Limits{KillGrace: time.Second},
					OnEvent: func(ev adapters.Event) {
						// Copilot names the session only at the end: wait for
						// its turn to start, then for the hanging request.
						if !started && ev.Kind == adapters.KindRaw && strings.Contains(string(ev.Raw), `"assistant.turn_start"`) {
							started = true
							go func() { time.Sleep(time.Second); cancel() }()
						}
					},
				})
				cancel()
				require.Error(t, err, "output: %s", resTail(res))
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v %s", err, resTail(res))
				assert.Eventually(t, func() bool {
					return !strings.Contains(e.processes(t, sb), "--no-ask-user")
				}, 10*time.Second, 200*time.Millisecond, "no copilot process left running")
			})
		})
	}
}

// TestCopilotConversationAcrossLeases: turn 1 in one cold lease, turn 2 in a
// brand-new one through the conversation store (the session-state
// directory alone, relocated to the new workspace).
func TestCopilotConversationAcrossLeases(t *testing.T) {
	testenv.Short(t)
	for _, e := range copilotEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t)
			store, err := conversation.NewFileStore(t.TempDir(), make([]byte, 32))
			require.NoError(t, err)
			cold := func(in adapters.Input) (*harness.Result, error) {
				in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
				spec := e.spec
				spec.Workspace = workspace(t)
				return harness.Run(context.Background(), harness.Turn{Adapter: copilot.New(), Input: in,
					Provider: e.provider, Spec: spec, Store: store, Limits: harness.Limits{Deadline: 2 * time.Minute}})
			}
			r1, err := cold(adapters.Input{Prompt: "first MARK-a1"})
			require.NoError(t, err, "output: %s", resTail(r1))
			m, err := store.Stat(context.Background(), r1.Conversation)
			require.NoError(t, err, "turn 1 captured")
			assert.Equal(t, "copilot", m.Agent)

			r2, err := cold(adapters.Input{Prompt: "second MARK-a2", Continue: r1.Conversation})
			require.NoError(t, err, "output: %s", resTail(r2))
			assert.Equal(t, r1.Conversation, r2.Conversation)
			assert.Equal(t, "outpost ok: MARK-a2. remembered: MARK-a1", r2.Text, "a brand-new lease recalls turn 1")

			r3, err := cold(adapters.Input{Prompt: "third MARK-a3", Continue: r1.Conversation})
			require.NoError(t, err, "output: %s", resTail(r3))
			assert.Equal(t, "outpost ok: MARK-a3. remembered: MARK-a1 MARK-a2", r3.Text)
		})
	}
}
