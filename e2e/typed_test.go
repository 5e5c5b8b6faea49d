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
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/typed"
)

// verdictSchema is strict-mode compatible (every property required, no
// others), as OpenAI structured output wants.
const verdictSchema = `{"type":"object","properties":{"verdict":{"type":"string","enum":["pass","fail"]},` +
	`"score":{"type":"integer"}},"required":["verdict","score"],"additionalProperties":false}`

// verdict is verdictSchema compiled.
var verdict = func() *typed.Schema {
	s, err := typed.Compile([]byte(verdictSchema))
	if err != nil {
		panic(err)
	}
	return s
}()

// typedCodexTurn runs a typed Codex turn against srv in the warm lease sb.
func typedCodexTurn(ctx context.Context, sb sandbox.Sandbox, srv *outposttest.Server, prompt string, onEvent func(adapters.Event)) (*harness.Result, error) {
	zero := 0
	return harness.Run(ctx, harness.Turn{
		Adapter: codex.New(), Sandbox: sb, KeepEvents: true, OnEvent: onEvent, Schema: verdict,
		Input: adapters.Input{Prompt: prompt, MaxRetries: &zero,
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
		Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute, KillGrace: 2 * time.Second},
	})
}

// scratchDirs lists the turn scratch directories left in the lease's home.
func scratchDirs(t *testing.T, sb sandbox.Sandbox) []string {
	t.Helper()
	p, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"ls", "-a", sb.Home()}})
	require.NoError(t, err)
	defer p.Close()
	out := readAll(p)
	st, err := p.Wait()
	require.NoError(t, err)
	require.True(t, st.Success(), "ls %s: %s", sb.Home(), st)
	var left []string
	for _, name := range strings.Fields(out) {
		if strings.HasPrefix(name, ".outpost-turn-") {
			left = append(left, name)
		}
	}
	return left
}

// TestCodexTypedResponse: the real Codex answers through --output-schema;
// the value is validated, an invalid answer gets exactly one repair turn on
// the same thread, and the schema file is gone afterwards, also after a
// cancelled turn.
func TestCodexTypedResponse(t *testing.T) {
	testenv.Short(t)
	for _, e := range codexEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			t.Run("valid", func(t *testing.T) {
				srv := server(t, outposttest.WithAnswers(`{"verdict":"pass","score":7}`))
				sb := lease(t, e)
				res, err := typedCodexTurn(ctx, sb, srv, "judge MARK-ty1", nil)
				require.NoError(t, err, "output: %s", resTail(res))
				assert.JSONEq(t, `{"verdict":"pass","score":7}`, string(res.Value))
				assert.False(t, res.Repaired)
				reqs := srv.ModelRequests()
				require.Len(t, reqs, 1)
				assert.JSONEq(t, verdictSchema, string(reqs[0].OutputSchema), "the schema reached the model natively")
				assert.NotContains(t, reqs[0].UserText(), "JSON Schema:", "native support: the prompt is not changed")
				assert.Empty(t, scratchDirs(t, sb), "the schema file is gone")
			})
			t.Run("repaired once", func(t *testing.T) {
				srv := server(t, outposttest.WithAnswers(`{"verdict":"maybe","score":1}`, `{"verdict":"fail","score":2}`))
				sb := lease(t, e)
				res, err := typedCodexTurn(ctx, sb, srv, "judge MARK-ty2", nil)
				require.NoError(t, err, "output: %s", resTail(res))
				assert.JSONEq(t, `{"verdict":"fail","score":2}`, string(res.Value))
				assert.True(t, res.Repaired)
				reqs := srv.ModelRequests()
				require.Len(t, reqs, 2, "exactly one repair turn")
				assert.Contains(t, reqs[1].UserText(), "Your previous answer cannot be used")
				assert.Contains(t, reqs[1].UserText(), "at /verdict")
				assert.Contains(t, res.Text, `"fail"`)
				assert.Positive(t, res.Usage.Input)
				assert.Empty(t, scratchDirs(t, sb))
			})
			t.Run("still invalid", func(t *testing.T) {
				srv := server(t, outposttest.WithAnswers(`not json`, `{"verdict":"pass"}`))
				sb := lease(t, e)
				_, err := typedCodexTurn(ctx, sb, srv, "judge MARK-ty3", nil)
				require.Error(t, err)
				assert.Equal(t, outposterr.Protocol, outposterr.ClassOf(err))
				assert.Contains(t, err.Error(), "missing property 'score'")
				assert.Len(t, srv.ModelRequests(), 2, "never a second repair")
				assert.Empty(t, scratchDirs(t, sb))
			})
			t.Run("cancelled", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				res, err := typedCodexTurn(cctx, sb, srv, "judge MARK-ty4", func(ev adapters.Event) {
					if ev.Kind == adapters.KindConversation {
						go func() {
							time.Sleep(500 * time.Millisecond) // the model request hangs
							cancel()
						}()
					}
				})
				require.Error(t, err)
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
				assert.NotEmpty(t, res.Conversation)
				assert.Empty(t, scratchDirs(t, sb), "the schema file is gone after cancellation")
			})
		})
	}
}

// TestClaudeTypedResponse: Claude Code takes the schema natively
// (--json-schema: a StructuredOutput tool it validates itself, with one retry
// of its own); when it still ends with prose, Outpost's single repair turn
// resumes the session. The cold lease is kept for both turns.
func TestClaudeTypedResponse(t *testing.T) {
	testenv.Short(t)
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			run := func(t *testing.T, srv *outposttest.Server, prompt string) (*harness.Result, error) {
				one := 1
				spec := e.spec
				spec.Workspace = workspace(t)
				return harness.Run(context.Background(), harness.Turn{
					Adapter: claude.New(), Provider: e.provider, Spec: spec, KeepEvents: true, Schema: verdict,
					Input: adapters.Input{Prompt: prompt, MaxRetries: &one,
						Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
					Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
				})
			}
			t.Run("native", func(t *testing.T) {
				srv := server(t, outposttest.WithAnswers(`{"verdict":"maybe","score":1}`, `{"verdict":"pass","score":9}`))
				res, err := run(t, srv, "judge MARK-cty1")
				require.NoError(t, err, "output: %s", resTail(res))
				assert.JSONEq(t, `{"verdict":"pass","score":9}`, string(res.Value))
				assert.False(t, res.Repaired, "Claude Code retried the refused call itself")
				reqs := srv.ModelRequests()
				require.Len(t, reqs, 2)
				assert.Contains(t, reqs[0].Tools, "StructuredOutput", "the schema reached the CLI natively")
				assert.NotContains(t, reqs[0].UserText(), "JSON Schema:", "native support: the prompt is not changed")
			})
			t.Run("repair turn", func(t *testing.T) {
				srv := server(t, outposttest.WithAnswers("Looks fine to me.", "Still fine.", `{"verdict":"fail","score":2}`))
				res, err := run(t, srv, "judge MARK-cty2")
				require.NoError(t, err, "output: %s", resTail(res))
				assert.JSONEq(t, `{"verdict":"fail","score":2}`, string(res.Value))
				assert.True(t, res.Repaired)
				reqs := srv.ModelRequests()
				require.Len(t, reqs, 3, "the first turn (with Claude's own retry), then exactly one repair turn")
				assert.Contains(t, reqs[2].UserText(), "Your previous answer cannot be used: the answer is not a JSON value")
				var earlier []string
				for _, m := range reqs[2].Messages {
					if m.Role == "assistant" {
						earlier = append(earlier, m.Text())
					}
				}
				assert.Contains(t, earlier, "Still fine.", "the repair continues the same session")
			})
		})
	}
}

// TestCopilotTypedResponse: Copilot CLI has no structured-output flag, so
// the schema travels in the prompt; a prose answer gets the one repair turn
// on the resumed session.
func TestCopilotTypedResponse(t *testing.T) {
	testenv.Short(t)
	for _, e := range copilotEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t, outposttest.WithAnswers("Looks fine to me.", `{"verdict":"pass","score":4}`))
			sb := lease(t, e)
			res, err := harness.Run(context.Background(), harness.Turn{
				Adapter: copilot.New(), Sandbox: sb, KeepEvents: true, Schema: verdict,
				Input:  adapters.Input{Prompt: "judge MARK-pty1", Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
				Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
			})
			require.NoError(t, err, "output: %s", resTail(res))
			assert.JSONEq(t, `{"verdict":"pass","score":4}`, string(res.Value))
			assert.True(t, res.Repaired)
			reqs := srv.ModelRequests()
			require.Len(t, reqs, 2)
			assert.Contains(t, reqs[0].UserText(), "judge MARK-pty1\n\nReply with only one JSON value", "the schema is asked for in the prompt")
			assert.Contains(t, reqs[1].UserText(), "Your previous answer cannot be used: the answer is not a JSON value")
			assert.Empty(t, scratchDirs(t, sb), "no turn files for a prompt-only CLI")
		})
	}
}
