package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestCopilotLiveInput steers running Copilot CLI turns through the harness
// (Turn.Live: `copilot --acp`, a further session/prompt) inside host and
// Docker leases.
func TestCopilotLiveInput(t *testing.T) {
	testenv.Short(t)
	for _, e := range copilotEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			base := func(srv *outposttest.Server, tr harness.Turn, in adapters.Input) harness.Turn {
				in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
				tr.Adapter, tr.Input = copilot.New(), in
				return tr
			}
			t.Run("message while the answer streams", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(150*time.Millisecond))
				sb := lease(t, e)
				live := make(chan string, 1)
				steered := false
				res, err := liveTurn(context.Background(), base(srv, harness.Turn{Sandbox: sb}, adapters.Input{Prompt: "first MARK-cplive1"}),
					live, func(ev adapters.Event) {
						if ev.Kind == adapters.KindTextDelta && !steered {
							steered = true
							live <- "also MARK-cplive2"
						}
					})
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, 1, res.Counts[adapters.KindInput])
				assert.Equal(t, "outpost ok: MARK-cplive2. remembered: MARK-cplive1", res.Text,
					"the message replaced the running prompt in the same session")
				assert.Equal(t, 1, res.Counts[adapters.KindFinished])
				assert.Empty(t, res.Warnings)
				assert.True(t, res.Exited)
				assert.True(t, res.Usage.Complete, "usage read from the session files")
				assert.Positive(t, res.Usage.Input+res.Usage.Cached)
				reqs := srv.ModelRequests()
				require.NotEmpty(t, reqs)
				assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-cplive1")
				assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-cplive2", "the server saw the message in the conversation")

				next, err := copilotTurn(t, sb, server(t), adapters.Input{Prompt: "next MARK-cplive3", Continue: res.Conversation})
				require.NoError(t, err, "output: %s", resTail(next))
				assert.Equal(t, res.Conversation, next.Conversation)
				assert.Contains(t, next.Text, "remembered: MARK-cplive1 MARK-cplive2", "the ACP session continues in the JSON mode")
			})
			t.Run("missing session", func(t *testing.T) {
				srv := server(t)
				live := make(chan string, 1)
				live <- "never MARK-cplost"
				res, err := liveTurn(context.Background(), base(srv, harness.Turn{Sandbox: lease(t, e)},
					adapters.Input{Prompt: "MARK-cplost0", Continue: "01a23600-0000-4000-8000-000000000000"}), live, nil)
				require.Error(t, err)
				assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)
				assert.Contains(t, res.Warnings, "1 live input message(s) not delivered: the turn had ended")
			})
			t.Run("cancel", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				res, err := liveTurn(ctx, base(srv, harness.Turn{Sandbox: sb, Limits: harness.Limits{KillGrace: time.Second}},
					adapters.Input{Prompt: "MARK-cpcancel-" + e.name}), make(chan string), func(ev adapters.Event) {
					if ev.Kind == adapters.KindConversation {
						go func() { time.Sleep(time.Second); cancel() }()
					}
				})
				require.Error(t, err)
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v %s", err, resTail(res))
				assert.Eventually(t, func() bool {
					return !strings.Contains(e.processes(t, sb), "--no-ask-user")
				}, 10*time.Second, 200*time.Millisecond, "no copilot process left running")
			})
		})
	}
}
