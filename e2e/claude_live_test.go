package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

// liveTurn runs the live-input turn tr with live input from live; onEvent
// may send into live.
func liveTurn(ctx context.Context, tr harness.Turn, live chan string, onEvent func(adapters.Event)) (*harness.Result, error) {
	tr.Live, tr.OnEvent, tr.KeepEvents = live, onEvent, true
	if tr.Limits.Deadline == 0 {
		tr.Limits.Deadline, tr.Limits.IdleTimeout = 2*time.Minute, time.Minute
	}
	return harness.Run(ctx, tr)
}

// TestClaudeLiveInput steers running Claude Code turns through the harness
// (Turn.Live: stream-json input) inside host and Docker leases.
func TestClaudeLiveInput(t *testing.T) {
	testenv.Short(t)
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			base := func(srv *outposttest.Server, sb harness.Turn, in adapters.Input) harness.Turn {
				zero := 0
				in.MaxRetries = &zero
				in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
				sb.Adapter, sb.Input = claude.New(claude.WithPartialMessages()), in
				return sb
			}
			t.Run("message while the answer streams", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(150*time.Millisecond))
				sb := lease(t, e)
				live := make(chan string, 1) // OnEvent runs on the goroutine that reads it
				steered := false
				res, err := liveTurn(context.Background(), base(srv, harness.Turn{Sandbox: sb}, adapters.Input{Prompt: "first MARK-live1"}),
					live, func(ev adapters.Event) {
						if ev.Kind == adapters.KindTextDelta && !steered {
							steered = true // the first answer is streaming
							live <- "also MARK-live2"
						}
					})
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, 1, res.Counts[adapters.KindInput], "the message was delivered")
				assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", res.Text,
					"the final answer is the message's, in the same conversation")
				assert.Equal(t, 1, res.Counts[adapters.KindConversation])
				assert.Equal(t, 2, res.Counts[adapters.KindResult])
				assert.Equal(t, 1, res.Counts[adapters.KindFinished])
				assert.Empty(t, res.Warnings, "claude exited once its stdin closed")
				assert.True(t, res.Exited)
				assert.True(t, res.Usage.Complete)
				assert.Positive(t, res.Usage.CostUSD)

				reqs := srv.ModelRequests()
				require.Len(t, reqs, 2)
				last := reqs[1]
				assert.Contains(t, last.UserText(), "MARK-live1")
				assert.Contains(t, last.UserText(), "MARK-live2", "the server saw the message in the conversation")
				var roles []string
				for _, m := range last.Messages {
					roles = append(roles, m.Role)
				}
				assert.Contains(t, roles, "assistant", "with the first answer before it")

				next, err := turn(t, sb, server(t), adapters.Input{Prompt: "next MARK-live3", Continue: res.Conversation}, false)
				require.NoError(t, err, "output: %s", resTail(next))
				assert.Equal(t, res.Conversation, next.Conversation)
				assert.Equal(t, "outpost ok: MARK-live3. remembered: MARK-live1 MARK-live2", next.Text,
					"the live turn's conversation continues with an ordinary turn")
			})
			t.Run("live input closed at once", func(t *testing.T) {
				srv := server(t)
				live := make(chan string)
				close(live)
				res, err := liveTurn(context.Background(), base(srv, harness.Turn{Sandbox: lease(t, e)}, adapters.Input{Prompt: "only MARK-closed1"}), live, nil)
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, "outpost ok: MARK-closed1.", res.Text, "the turn ends on the prompt's result")
				assert.Empty(t, res.Warnings)
				assert.Zero(t, res.Counts[adapters.KindInput])
			})
			t.Run("undeliverable message is a warning", func(t *testing.T) {
				srv := server(t)
				live := make(chan string, 1)
				live <- "never MARK-lost1"
				res, err := liveTurn(context.Background(), base(srv, harness.Turn{Sandbox: lease(t, e)},
					adapters.Input{Prompt: "MARK-lost0", Continue: "00000000-0000-4000-8000-000000000000"}), live, nil)
				require.Error(t, err)
				assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)
				assert.Zero(t, res.Counts[adapters.KindInput])
				assert.Contains(t, res.Warnings, "1 live input message(s) not delivered: the turn had ended")
			})
			t.Run("cancel", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				live := make(chan string, 1)
				sent := false
				res, err := liveTurn(ctx, base(srv, harness.Turn{Sandbox: sb, Limits: harness.Limits{KillGrace: time.Second}},
					adapters.Input{Prompt: "MARK-livecancel-" + e.name}), live, func(ev adapters.Event) {
					if ev.Kind == adapters.KindInput {
						// The CLI took the message and waits on the hanging server.
						go func() { time.Sleep(300 * time.Millisecond); cancel() }()
					}
					if ev.Kind == adapters.KindConversation && !sent {
						sent = true
						live <- "more MARK-livecancel2"
					}
				})
				require.Error(t, err)
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
				assert.NotEmpty(t, res.Conversation)
				assert.Eventually(t, func() bool {
					return !strings.Contains(e.processes(t, sb), "claude --print")
				}, 10*time.Second, 200*time.Millisecond, "no claude process left running")
			})
		})
	}
}
