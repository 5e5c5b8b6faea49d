package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/driver"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// The fake CLIs of the spec-driver tests are shell scripts in the
// workspace: the same files run on the host and in a Docker lease.
const (
	textDriver = `{"id":"texty","binary":"sh","args":["tools/texty.sh",["--model","${input.model}"]],
		"stdin":"${input.prompt}","env":{"TEXTY_KEY":"${secrets.TEXTY_KEY}"},"secrets":["TEXTY_KEY"],
		"output":{"mode":"text"},
		"failures":{"exit_codes":{"3":"quota"},"quota":["try again (?P<reset>in [0-9]+ hours)"],"unavailable":["(?i)overloaded"]}}`
	textScript = `prompt=$(cat)
case "$prompt" in
*quota*) echo "usage exhausted, try again in 5 hours" >&2; exit 3 ;;
*overloaded*) echo "server overloaded" >&2; exit 1 ;;
*hang*) echo "thinking"; sleep 3131 ;;
esac
echo "echo: $prompt"
[ -n "$TEXTY_KEY" ] && echo "key is set"
`
	jsonlDriver = `{"id":"liney","binary":"sh","args":["${input.workspace}/tools/liney.sh",["--resume","${input.conversation}"]],
		"stdin":"${input.prompt}","workdir":"tools","requires_final":true,
		"output":{"mode":"jsonl","rules":[
			{"match":{"type":"init"},"event":"conversation","fields":{"id":"session"}},
			{"match":{"type":"say"},"event":"text","fields":{"text":"text"}},
			{"match":{"type":"call"},"event":"tool","fields":{"name":"tool","input":"args","id":"id"}},
			{"match":{"type":"end"},"event":"usage","fields":{"input":"tokens.in","output":"tokens.out"}},
			{"match":{"type":"end"},"event":"final","fields":{"text":"answer","ok":"status"},"ok_values":["done"]},
			{"match":{"type":"error"},"event":"failure","fields":{"text":"message"}}]},
		"failures":{"quota":["(?i)rate limited"],"auth":["(?i)bad credentials"]}}`
	// tools/liney.sh runs in tools/ (the driver's workdir): it prints its cwd.
	jsonlScript = `prompt=$(cat)
id=sess-9
[ "$1" = "--resume" ] && id=$2
echo '{"type":"init","session":"'$id'"}'
case "$prompt" in
*ratelimit*) echo '{"type":"error","message":"Rate limited by upstream"}'; exit 1 ;;
*creds*) echo '{"type":"error","message":"bad credentials"}'; exit 1 ;;
*hang*) exec sleep 3171 ;;
esac
echo '{"type":"say","text":"working in '$(basename "$PWD")'"}'
echo '{"type":"call","tool":"grep","args":{"q":"x"},"id":"t1"}'
echo '{"type":"end","status":"done","answer":"'"$id: $prompt"'","tokens":{"in":21,"out":5}}'
`
)

func driverEnvs(t *testing.T) []env {
	h := hostEnv(t, "/bin/sh")
	d := dockerEnv(t, "/bin/sh")
	d.spec = sandbox.Spec{Env: map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}}
	return []env{h, d}
}

func parseDriver(t *testing.T, spec string) *driver.Adapter {
	t.Helper()
	s, err := driver.Parse([]byte(spec), "test.json")
	require.NoError(t, err)
	return driver.New(s)
}

// driverLease is a lease whose workspace holds the fake CLIs.
func driverLease(t *testing.T, e env) sandbox.Sandbox {
	t.Helper()
	sb, ws := leaseIn(t, e)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "tools", "texty.sh"), []byte(textScript), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "tools", "liney.sh"), []byte(jsonlScript), 0o644))
	return sb
}

func driverTurn(ctx context.Context, sb sandbox.Sandbox, a adapters.Adapter, in adapters.Input, onEvent func(adapters.Event)) (*harness.Result, error) {
	return harness.Run(ctx, harness.Turn{Adapter: a, Input: in, Sandbox: sb, KeepEvents: true, OnEvent: onEvent,
		Limits: harness.Limits{Deadline: time.Minute, KillGrace: 2 * time.Second}})
}

// TestSpecDrivers runs a text-mode and a JSONL spec driver in host and
// Docker leases: events, classification and cancellation.
func TestSpecDrivers(t *testing.T) {
	testenv.Short(t)
	for _, e := range driverEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			sb := driverLease(t, e)
			texty, liney := parseDriver(t, textDriver), parseDriver(t, jsonlDriver)
			ctx := context.Background()
			secret := map[string]string{"TEXTY_KEY": "MARK-drv-secret"}

			t.Run("text ok", func(t *testing.T) {
				res, err := driverTurn(ctx, sb, texty, adapters.Input{Prompt: "hi MARK-d1", Env: secret}, nil)
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, "echo: hi MARK-d1\nkey is set", res.Text)
				assert.Equal(t, 2, res.Counts[adapters.KindText])
				assert.NotContains(t, resTail(res), "MARK-drv-secret")
			})
			t.Run("text quota", func(t *testing.T) {
				before := time.Now()
				_, err := driverTurn(ctx, sb, texty, adapters.Input{Prompt: "quota please", Env: secret}, nil)
				e, ok := outposterr.As(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, outposterr.Quota, e.Class)
				assert.WithinDuration(t, before.Add(5*time.Hour), e.Details.ResetAt, time.Minute)
			})
			t.Run("text outage", func(t *testing.T) {
				_, err := driverTurn(ctx, sb, texty, adapters.Input{Prompt: "overloaded", Env: secret}, nil)
				e, ok := outposterr.As(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, outposterr.Process, e.Class)
				assert.Equal(t, "overloaded", e.Details.Unavailable)
			})
			t.Run("jsonl ok and resume", func(t *testing.T) {
				res, err := driverTurn(ctx, sb, liney, adapters.Input{Prompt: "first"}, nil)
				require.NoError(t, err, "output: %s", resTail(res))
				assert.Equal(t, "sess-9", res.Conversation)
				assert.Equal(t, "sess-9: first", res.Text)
				assert.Equal(t, int64(21), res.Usage.Input)
				assert.True(t, res.Usage.Complete)
				assert.Equal(t, 1, res.Counts[adapters.KindTool])
				var said string
				for _, ev := range res.Events {
					if ev.Kind == adapters.KindText {
						said = ev.Text
					}
				}
				assert.Equal(t, "working in tools", said, "the driver's workdir is tools/ in the workspace")

				res, err = driverTurn(ctx, sb, liney, adapters.Input{Prompt: "again", Continue: "sess-9"}, nil)
				require.NoError(t, err)
				assert.Equal(t, "sess-9: again", res.Text)
			})
			t.Run("jsonl failures", func(t *testing.T) {
				_, err := driverTurn(ctx, sb, liney, adapters.Input{Prompt: "ratelimit"}, nil)
				assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
				_, err = driverTurn(ctx, sb, liney, adapters.Input{Prompt: "creds"}, nil)
				e, ok := outposterr.As(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, "bad credentials", e.Details.Auth)
			})
			t.Run("secret stays in env", func(t *testing.T) {
				var logs bytes.Buffer
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				var argv string
				res, err := harness.Run(cctx, harness.Turn{Adapter: texty, Sandbox: sb, KeepEvents: true,
					Input:  adapters.Input{Prompt: "hang MARK-sec", Env: secret},
					Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
					OnEvent: func(ev adapters.Event) {
						if ev.Kind == adapters.KindText {
							argv = e.processes(t, sb) // the CLI runs: sample every command line
							cancel()
						}
					},
					Limits: harness.Limits{Deadline: time.Minute, KillGrace: 2 * time.Second}})
				require.Error(t, err)
				require.Contains(t, argv, "sh tools/texty.sh", "the sample saw the driver running")
				out, _ := json.Marshal(res)
				outcome, _ := json.Marshal(res.Outcome())
				for what, text := range map[string]string{"argv": argv, "logs": logs.String(), "result": string(out),
					"outcome": string(outcome), "error": err.Error()} {
					assert.NotContains(t, text, "MARK-drv-secret", what)
				}
			})
			// Each fake sleeps for a duration no other test uses, so the
			// process check sees only its own.
			for name, a := range map[string]adapters.Adapter{"text": texty, "jsonl": liney} {
				sleeper := map[string]string{"text": "sleep 3131", "jsonl": "sleep 3171"}[name]
				t.Run(name+" cancel", func(t *testing.T) {
					cctx, cancel := context.WithCancel(ctx)
					defer cancel()
					res, err := driverTurn(cctx, sb, a, adapters.Input{Prompt: "hang MARK-" + name, Env: secret}, func(ev adapters.Event) {
						if ev.Kind == adapters.KindText || ev.Kind == adapters.KindConversation {
							cancel() // the CLI is running
						}
					})
					require.Error(t, err)
					assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
					assert.NotNil(t, res)
					assert.Eventually(t, func() bool {
						return !strings.Contains(e.processes(t, sb), sleeper)
					}, 10*time.Second, 200*time.Millisecond, "no process of the driver left")
				})
			}
		})
	}
}
