package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

const fakeMCPInContainer = "/opt/outpost/bin/fake-mcp"

// TestMCPMarkerSecretNeverLeaks gives each real CLI, in a Docker lease, two
// MCP servers (the fake, mounted into the lease): one whose env carries a
// marker as a literal value, one whose env references a declared variable
// holding another marker; each server also gets a literal copy of its
// marker and refuses to start unless both match. While the turn runs, the command line of every process
// on the machine is sampled (container processes included); afterwards
// `docker inspect`, the debug logs (-v), the events and the result are
// searched. No marker may appear anywhere, and the servers must have
// received them: both servers' tools reach the model server (Codex, which
// defers MCP tools, requires both servers to start).
func TestMCPMarkerSecretNeverLeaks(t *testing.T) {
	testenv.Short(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cases := []struct {
		name    string
		env     func(t *testing.T) env
		adapter adapters.Adapter
		key     string
		tools   bool // the model request lists MCP tools (Codex defers them to tool_search)
	}{
		{"claude", func(t *testing.T) env { return dockerEnv(t, testenv.CLI(t, "claude")) }, claude.New(), "placeholder", true},
		{"codex", func(t *testing.T) env { return codexEnvs(t)[1] }, codex.New(), outposttest.PlaceholderKey, false},
		{"copilot", func(t *testing.T) env { return copilotEnvs(t)[1] }, copilot.New(), outposttest.PlaceholderKey, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			e.spec.Mounts = append(e.spec.Mounts, sandbox.Mount{Source: exe, Target: fakeMCPInContainer, ReadOnly: true})
			dp := e.provider.(*docker.Provider)
			srv := server(t)
			literal, referenced := "lit"+tc.name+"mark7q", "ref"+tc.name+"mark9z"
			base := map[string]string{fakecli.ChildEnv: "1", fakecli.MCPEnv: "1", "GORACE": "atexit_sleep_ms=0"}
			with := func(kv ...string) map[string]string {
				m := map[string]string{}
				for k, v := range base {
					m[k] = v
				}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i]] = kv[i+1]
				}
				return m
			}
			// One server per turn: Codex forwards one value per variable
			// name to all its servers.
			servers := []credentials.MCPServer{
				{Name: "lit", Command: fakeMCPInContainer, Env: with("FAKECLI_MCP_SUFFIX", "lit",
					fakecli.MCPSecretEnv, literal, fakecli.MCPExpectEnv, literal)},
				{Name: "ref", Command: fakeMCPInContainer, Env: with("FAKECLI_MCP_SUFFIX", "ref",
					fakecli.MCPSecretEnv, "${"+fakecli.MCPSecretEnv+"}", fakecli.MCPExpectEnv, referenced)},
			}
			var logs bytes.Buffer
			var mu sync.Mutex
			var argv, events []string
			sample := func() {
				out, err := exec.Command("ps", "-eo", "args").Output()
				require.NoError(t, err)
				mu.Lock()
				argv = append(argv, string(out))
				mu.Unlock()
			}
			for _, s := range servers {
				if tc.name == "codex" {
					s.Required, s.StartupTimeoutMS = true, 20000
				}
				vars := map[string]string{}
				if s.Name == "ref" {
					vars[fakecli.MCPSecretEnv] = referenced
				}
				sb, _ := leaseIn(t, e)
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() { // the whole machine's argv, every 200 ms while the turn runs
					defer close(sampled)
					for {
						sample()
						select {
						case <-stop:
							return
						case <-time.After(200 * time.Millisecond):
						}
					}
				}()
				one := 1
				res, err := harness.Run(context.Background(), harness.Turn{
					Adapter: tc.adapter, Sandbox: sb, KeepEvents: true,
					Input: adapters.Input{Prompt: "MARK-mcp", MCP: []credentials.MCPServer{s}, MaxRetries: &one,
						Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: tc.key}},
					Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None},
						Vars: vars},
					Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
					OnEvent: func(ev adapters.Event) {
						b, _ := json.Marshal(ev)
						mu.Lock()
						events = append(events, string(b))
						mu.Unlock()
					},
					Limits: harness.Limits{Deadline: 2 * time.Minute},
				})
				close(stop)
				<-sampled
				require.NoError(t, err, "server %s: %s", s.Name, resTail(res))
				inspect, err := dp.Client().ContainerInspect(context.Background(), sb.ID())
				require.NoError(t, err)
				inspectJSON, _ := json.Marshal(inspect)
				resJSON, _ := json.Marshal(res)
				places := map[string]string{"docker inspect": string(inspectJSON), "result": string(resJSON)}
				for where, text := range places {
					for _, marker := range []string{literal, referenced} {
						assert.NotContains(t, text, marker, "an MCP value leaked into %s (server %s)", where, s.Name)
					}
				}
				// The turn file went with the turn.
				assert.Empty(t, strings.TrimSpace(inside(t, sb, "sh", "-c", "ls -d "+path.Join(sb.Home(), ".outpost-turn-")+"* 2>/dev/null")))
			}
			all := strings.Join(argv, "\n")
			assert.Contains(t, all, fakeMCPInContainer, "the sample saw the MCP servers running")
			assert.Contains(t, logs.String(), "msg=exec", "the debug log shows the command")
			places := map[string]string{"argv": all, "logs": logs.String(), "events": strings.Join(events, "\n")}
			for where, text := range places {
				for _, marker := range []string{literal, referenced} {
					assert.NotContains(t, text, marker, "an MCP value leaked into %s", where)
				}
			}
			if tc.tools {
				var tools []string
				for _, r := range srv.ModelRequests() {
					tools = append(tools, r.Tools...)
				}
				joined := strings.Join(tools, ",")
				assert.Contains(t, joined, "echo_lit", "the literal value reached its server (or it would not have started)")
				assert.Contains(t, joined, "echo_ref", "the referenced value reached its server")
			}
		})
	}
}
