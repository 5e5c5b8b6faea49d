package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestMarkerSecretNeverLeaks passes a marker secret through every Claude
// credential form into a Docker lease, runs a real turn, and greps every
// place a secret could travel: the argv of every process in the container
// during the turn, `docker inspect` of the container, the events (what
// --json prints), the debug logs, the Result and its outcome, the captured
// conversation archive, and the error and outcome of a failing turn.
func TestMarkerSecretNeverLeaks(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	e := dockerEnv(t, bin)
	dp := e.provider.(*docker.Provider)
	srv := server(t)

	forms := []struct {
		auth string
		vars func(secret string) map[string]string
		home func(t *testing.T, secret string) string
	}{
		{auth: "account:file", home: func(t *testing.T, secret string) string {
			home := t.TempDir()
			writeFile(t, filepath.Join(home, ".claude", ".credentials.json"),
				`{"claudeAiOauth":{"accessToken":"`+secret+`","refreshToken":"`+secret+`-r","expiresAt":4102444800000,"scopes":["user:inference"]}}`)
			return home
		}},
		{auth: "account:variable", vars: func(s string) map[string]string { return map[string]string{claude.OAuthTokenVar: s} }},
		{auth: "usage", vars: func(s string) map[string]string { return map[string]string{claude.APIKeyVar: s} }},
	}
	for _, form := range forms {
		t.Run(form.auth, func(t *testing.T) {
			secret := "outpost-marker-" + strings.ReplaceAll(form.auth, ":", "-") + "-5e3c7a91"
			auth, err := credentials.ParseAuth(form.auth)
			require.NoError(t, err)
			creds := &harness.Credentials{Auth: auth, Vars: map[string]string{"PROJECT_SETTING": "plain"}}
			if form.vars != nil {
				for k, v := range form.vars(secret) {
					creds.Vars[k] = v
				}
			}
			if form.home != nil {
				creds.HostHome = form.home(t, secret)
			}
			sb, _ := leaseIn(t, e)
			storeDir := t.TempDir()
			store, err := conversation.NewFileStore(storeDir, nil)
			require.NoError(t, err)
			var logs bytes.Buffer
			var mu sync.Mutex
			var argv, events []string
			res, err := harness.Run(context.Background(), harness.Turn{
				Adapter: claude.New(), Sandbox: sb, Credentials: creds, KeepEvents: true, Store: store,
				Input:  adapters.Input{Prompt: "say MARK-secret", Endpoint: &adapters.Endpoint{BaseURL: srv.URL()}},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnEvent: func(ev adapters.Event) {
					b, _ := json.Marshal(ev)
					mu.Lock()
					events = append(events, string(b))
					mu.Unlock()
					if ev.Kind == adapters.KindConversation {
						// The CLI is running: record every argv in the container.
						out := e.processes(t, sb)
						mu.Lock()
						argv = append(argv, out)
						mu.Unlock()
					}
				},
				Limits: harness.Limits{Deadline: 2 * time.Minute},
			})
			require.NoError(t, err, "stderr: %s", resTail(res))
			assert.Contains(t, res.Text, "MARK-secret")
			require.NotEmpty(t, argv, "argv was sampled while the CLI ran")
			assert.Contains(t, strings.Join(argv, "\n"), "claude", "the sample saw the CLI")

			inspect, err := dp.Client().ContainerInspect(context.Background(), sb.ID())
			require.NoError(t, err)
			inspectJSON, _ := json.Marshal(inspect)
			resJSON, _ := json.Marshal(res)
			outcomeJSON, _ := json.Marshal(res.Outcome())
			// The captured conversation archive (zstd, decompressed here).
			_, rc, err := store.Load(context.Background(), res.Conversation)
			require.NoError(t, err, "the turn was captured")
			archive, _ := io.ReadAll(rc)
			require.NotEmpty(t, archive)
			// A failing turn's error, with the same credential.
			failRes, failErr := harness.Run(context.Background(), harness.Turn{
				Adapter: claude.New(), Sandbox: sb, Credentials: creds,
				Input: adapters.Input{Prompt: "fail [[outpost:scenario=unauthorized]] MARK-f", MaxRetries: new(int),
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL()}},
			})
			require.Error(t, failErr)
			failJSON, _ := json.Marshal(failRes.Outcome())
			places := map[string]string{
				"archive": string(archive), "error": failErr.Error(), "failed outcome": string(failJSON),
				"argv": strings.Join(argv, "\n"), "docker inspect": string(inspectJSON),
				"events": strings.Join(events, "\n"), "logs": logs.String(),
				"result": string(resJSON), "outcome": string(outcomeJSON),
				"tails": res.StdoutTail + res.StderrTail, "server log": requestLog(srv),
			}
			for where, text := range places {
				assert.NotContains(t, text, secret, "the marker secret leaked into %s", where)
			}
			// The credential did reach the CLI, so the test proves something.
			last := srv.ModelRequests()[len(srv.ModelRequests())-1]
			sent := last.Header.Get("X-Api-Key") + last.Header.Get("Authorization")
			assert.NotEmpty(t, sent, "the CLI authenticated with the planned credential")
			if form.home != nil {
				assert.Contains(t, inside(t, sb, "cat", filepath.Join(sb.Home(), ".claude", ".credentials.json")), secret)
			}

			// The agent prints the credential with its shell tool (read from
			// an environment or the login file): Outpost keeps and shows it
			// nowhere, the stored conversation included. The model server
			// does get it: that is the agent's doing.
			// (Claude Code keeps its OAuth token out of its tools'
			// environment, not out of its own: /proc has it.)
			leak := `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -E '^(` + claude.OAuthTokenVar + `|` + claude.APIKeyVar +
				`)=' | sort -u; cat "$HOME/.claude/.credentials.json" 2>/dev/null; true`
			var leakEvents []string
			leakRes, leakErr := harness.Run(context.Background(), harness.Turn{
				Adapter: claude.New(), Sandbox: sb, Credentials: creds, KeepEvents: true, Store: store,
				Input: adapters.Input{Prompt: "leak " + outposttest.RunDirective(leak) + " MARK-leak",
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL()}},
				OnEvent: func(ev adapters.Event) {
					b, _ := json.Marshal(ev)
					leakEvents = append(leakEvents, string(b))
				},
				Limits: harness.Limits{Deadline: 2 * time.Minute},
			})
			require.NoError(t, leakErr, "stderr: %s", resTail(leakRes))
			leakJSON, _ := json.Marshal(leakRes)
			_, rc, err = store.Load(context.Background(), leakRes.Conversation)
			require.NoError(t, err, "the turn was captured")
			leakArchive, _ := io.ReadAll(rc)
			_ = rc.Close()
			require.NotEmpty(t, leakArchive)
			printed := strings.Join(leakEvents, "\n") + "\n" + string(leakJSON) + "\n" + string(leakArchive)
			assert.NotContains(t, printed, secret, "the printed credential leaked into the events or the result")
			assert.Contains(t, printed, gateway.Redaction, "the tool printed the credential, replaced")
			assert.True(t, leakRes.SecretPrinted, "the result says a secret was printed")
			assert.Contains(t, requestLog(srv), secret, "control: the tool did print it")
		})
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
}

func requestLog(srv *outposttest.Server) string {
	b, _ := json.Marshal(srv.Requests())
	return string(b)
}

func corrupt(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x55
	require.NoError(t, os.WriteFile(p, b, 0o600))
}

// TestCodexUsageLoginInSandbox: the usage form stores the key with
// `codex login --with-api-key` inside a Docker lease (key on stdin); the
// marker reaches auth.json and nothing else.
func TestCodexUsageLoginInSandbox(t *testing.T) {
	testenv.Short(t)
	envs := codexEnvs(t)
	e := envs[1] // Docker: the host sandbox runs no login commands
	dp := e.provider.(*docker.Provider)
	srv := server(t)
	secret := "sk-outpost-marker-codex-4b1d"
	sb, _ := leaseIn(t, e)
	var events []string
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: codex.New(), Sandbox: sb, KeepEvents: true, Limits: harness.Limits{Deadline: 2 * time.Minute},
		Input: adapters.Input{Prompt: "say MARK-login", Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.Usage},
			Vars: map[string]string{codex.OpenAIKeyVar: secret}},
		OnEvent: func(ev adapters.Event) { b, _ := json.Marshal(ev); events = append(events, string(b)) },
	})
	require.NoError(t, err, "output: %s", resTail(res))
	authJSON := inside(t, sb, "cat", sb.Home()+"/.codex/auth.json")
	assert.Contains(t, authJSON, secret, "the login stored the key")
	assert.Contains(t, inside(t, sb, "stat", "-c", "%a", sb.Home()+"/.codex/auth.json"), "600")
	inspect, err := dp.Client().ContainerInspect(context.Background(), sb.ID())
	require.NoError(t, err)
	inspectJSON, _ := json.Marshal(inspect)
	resJSON, _ := json.Marshal(res)
	for where, text := range map[string]string{"events": strings.Join(events, "\n"), "result": string(resJSON),
		"docker inspect": string(inspectJSON), "server log": requestLog(srv)} {
		assert.NotContains(t, text, secret, "leaked into %s", where)
	}
}

// TestMarkerSecretOtherForms: the Codex account file and the Copilot token
// variable and login-file forms, each with a marker, in Docker leases; the
// marker reaches the CLI's environment or home and none of the places a
// secret could leak.
func TestMarkerSecretOtherForms(t *testing.T) {
	testenv.Short(t)
	type form struct {
		name    string
		adapter adapters.Adapter
		env     env
		auth    credentials.Auth
		vars    func(secret string) map[string]string
		home    func(t *testing.T, secret string) string
	}
	cx, cp := codexEnvs(t)[1], copilotEnvs(t)[1]
	forms := []form{
		{name: "codex account file", adapter: codex.New(), env: cx, auth: credentials.Auth{Form: credentials.Account},
			home: func(t *testing.T, s string) string {
				h := t.TempDir()
				writeFile(t, filepath.Join(h, ".codex", "auth.json"),
					`{"auth_mode":"chatgpt","tokens":{"access_token":"`+s+`","refresh_token":"`+s+`-r","id_token":"x"},"last_refresh":"2026-12-01T00:00:00Z"}`)
				return h
			}},
		{name: "copilot token variable", adapter: copilot.New(), env: cp,
			auth: credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable},
			vars: func(s string) map[string]string { return map[string]string{copilot.TokenVar: "github_pat_" + s} }},
		{name: "copilot login file", adapter: copilot.New(), env: cp, auth: credentials.Auth{Form: credentials.Account},
			home: func(t *testing.T, s string) string {
				h := t.TempDir()
				writeFile(t, filepath.Join(h, ".copilot", "config.json"),
					"{\n  // login\n  \"lastLoggedInUser\": {\"host\": \"https://github.com\", \"login\": \"me\"},\n  \"authTokens\": {\"https://github.com:me\": \"gho_"+s+"\"},\n}\n")
				return h
			}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			secret := "outpost-marker-" + strings.ReplaceAll(f.name, " ", "-") + "-7c21"
			srv := server(t)
			creds := &harness.Credentials{Auth: f.auth, Vars: map[string]string{}}
			if f.vars != nil {
				creds.Vars = f.vars(secret)
			}
			if f.home != nil {
				creds.HostHome = f.home(t, secret)
			}
			sb, _ := leaseIn(t, f.env)
			var events []string
			var logs bytes.Buffer
			res, err := harness.Run(context.Background(), harness.Turn{
				Adapter: f.adapter, Sandbox: sb, Credentials: creds, Limits: harness.Limits{Deadline: 2 * time.Minute},
				Input: adapters.Input{Prompt: "say MARK-other", MaxRetries: new(int),
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
				Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnEvent: func(ev adapters.Event) { b, _ := json.Marshal(ev); events = append(events, string(b)) },
			})
			require.NoError(t, err, "output: %s", resTail(res))
			inspect, err := f.env.provider.(*docker.Provider).Client().ContainerInspect(context.Background(), sb.ID())
			require.NoError(t, err)
			inspectJSON, _ := json.Marshal(inspect)
			resJSON, _ := json.Marshal(res)
			for where, text := range map[string]string{"events": strings.Join(events, "\n"), "result": string(resJSON),
				"docker inspect": string(inspectJSON), "logs": logs.String(), "server log": requestLog(srv)} {
				assert.NotContains(t, text, secret, "leaked into %s", where)
			}
		})
	}
}
