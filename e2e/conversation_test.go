package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestClaudeConversationAcrossLeases runs turn 1 in one cold lease and
// continues it in brand-new ones: resume recalls turn 1, a fork gets a new
// id and both branches continue; a quota-failed turn is captured and
// resumes once the server recovers.
func TestClaudeConversationAcrossLeases(t *testing.T) {
	testenv.Short(t)
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t)
			store, err := conversation.NewFileStore(t.TempDir(), make([]byte, 32))
			require.NoError(t, err)
			cold := func(in adapters.Input, oauth bool) (*harness.Result, error) {
				ep := &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
				if oauth {
					ep = &adapters.Endpoint{BaseURL: srv.URL(), OAuthToken: outposttest.PlaceholderOAuthToken}
				}
				in.Endpoint = ep
				one := 1
				in.MaxRetries = &one
				spec := e.spec
				spec.Workspace = workspace(t) // a new directory each time: relocation is exercised on the host
				return harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in,
					Provider: e.provider, Spec: spec, Store: store, Limits: harness.Limits{Deadline: 2 * time.Minute}})
			}
			r1, err := cold(adapters.Input{Prompt: "first MARK-a1"}, false)
			require.NoError(t, err, "stderr: %s", resTail(r1))
			m, err := store.Stat(context.Background(), r1.Conversation)
			require.NoError(t, err, "turn 1 captured")
			assert.Equal(t, "claude", m.Agent)

			r2, err := cold(adapters.Input{Prompt: "second MARK-a2", Continue: r1.Conversation}, false)
			require.NoError(t, err, "stderr: %s", resTail(r2))
			assert.Contains(t, r2.Text, "remembered: MARK-a1", "a brand-new lease recalls turn 1")
			last := srv.ModelRequests()[len(srv.ModelRequests())-1]
			assert.GreaterOrEqual(t, len(last.Messages), 3, "the server saw the earlier messages")

			f1, err := cold(adapters.Input{Prompt: "branch MARK-f1", Continue: r1.Conversation, Fork: true}, false)
			require.NoError(t, err, "stderr: %s", resTail(f1))
			assert.NotEqual(t, r1.Conversation, f1.Conversation)
			fm, err := store.Stat(context.Background(), f1.Conversation)
			require.NoError(t, err)
			assert.Equal(t, r1.Conversation, fm.Parent)

			r3, err := cold(adapters.Input{Prompt: "main again MARK-a3", Continue: r1.Conversation}, false)
			require.NoError(t, err)
			assert.Contains(t, r3.Text, "MARK-a2")
			assert.NotContains(t, r3.Text, "MARK-f1", "the original does not see the fork")
			f2, err := cold(adapters.Input{Prompt: "branch again MARK-f2", Continue: f1.Conversation}, false)
			require.NoError(t, err)
			assert.Contains(t, f2.Text, "MARK-f1")
			assert.NotContains(t, f2.Text, "MARK-a3", "the fork does not see the original's later turns")

			// A turn that hits the quota is captured and resumes after recovery.
			require.NoError(t, srv.SetScenario(outposttest.ScenarioQuota))
			q, err := cold(adapters.Input{Prompt: "limited MARK-q1"}, true)
			require.Error(t, err)
			require.True(t, outposterr.IsQuota(err), "%v", err)
			qm, err := store.Stat(context.Background(), q.Conversation)
			require.NoError(t, err, "the failed turn was captured")
			assert.True(t, qm.Failed)
			require.NoError(t, srv.SetScenario(outposttest.ScenarioOK))
			q2, err := cold(adapters.Input{Prompt: "continue MARK-q2", Continue: q.Conversation}, true)
			require.NoError(t, err, "stderr: %s", resTail(q2))
			assert.Contains(t, q2.Text, "MARK-q1")
		})
	}
}

// TestTamperedConversationRefused: a stored archive that does not match its
// digest is a session error before the CLI runs.
func TestTamperedConversationRefused(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	e := hostEnv(t, bin)
	dir := t.TempDir()
	store, err := conversation.NewFileStore(dir, nil)
	require.NoError(t, err)
	srv := server(t)
	in := adapters.Input{Prompt: "MARK-t1", Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: "k"}}
	r1, err := harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in, Provider: e.provider, Store: store})
	require.NoError(t, err)
	corrupt(t, dir+"/"+r1.Conversation+".tar.zst")
	before := len(srv.ModelRequests())
	in.Continue = r1.Conversation
	_, err = harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in, Provider: e.provider, Store: store})
	require.Error(t, err)
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err))
	assert.Equal(t, before, len(srv.ModelRequests()), "the CLI never ran")
}

// TestCodexConversationAcrossLeases: Codex turn 1 in one cold lease, resume
// and fork in brand-new ones; per-turn usage is the difference from the
// thread total stored with the conversation.
func TestCodexConversationAcrossLeases(t *testing.T) {
	testenv.Short(t)
	for _, e := range codexEnvs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t)
			store, err := conversation.NewFileStore(t.TempDir(), nil)
			require.NoError(t, err)
			cold := func(in adapters.Input) (*harness.Result, error) {
				in.Endpoint = &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
				one := 1
				in.MaxRetries = &one
				spec := e.spec
				spec.Workspace = workspace(t)
				return harness.Run(context.Background(), harness.Turn{Adapter: codex.New(), Input: in,
					Provider: e.provider, Spec: spec, Store: store, Limits: harness.Limits{Deadline: 2 * time.Minute}})
			}
			r1, err := cold(adapters.Input{Prompt: "first MARK-x1"})
			require.NoError(t, err, "output: %s", resTail(r1))
			m1, err := store.Stat(context.Background(), r1.Conversation)
			require.NoError(t, err)
			require.NotNil(t, m1.UsageTotal)

			r2, err := cold(adapters.Input{Prompt: "second MARK-x2", Continue: r1.Conversation})
			require.NoError(t, err, "output: %s", resTail(r2))
			assert.Contains(t, r2.Text, "remembered: MARK-x1", "a brand-new lease recalls turn 1")
			assert.True(t, r2.Usage.Complete, "per-turn usage against the stored total")
			m2, err := store.Stat(context.Background(), r2.Conversation)
			require.NoError(t, err)
			assert.Equal(t, m2.UsageTotal.Input-m1.UsageTotal.Input, r2.Usage.Input, "turn 2 counts only its own tokens")

			f, err := cold(adapters.Input{Prompt: "branch MARK-x3", Continue: r1.Conversation, Fork: true})
			require.NoError(t, err, "output: %s", resTail(f))
			assert.NotEqual(t, r1.Conversation, f.Conversation)
			assert.Contains(t, f.Text, "MARK-x2")
			fm, err := store.Stat(context.Background(), f.Conversation)
			require.NoError(t, err)
			assert.Equal(t, r1.Conversation, fm.Parent)

			// Both branches continue, each in a new lease, without the other's turns.
			r3, err := cold(adapters.Input{Prompt: "main again MARK-x4", Continue: r1.Conversation})
			require.NoError(t, err, "output: %s", resTail(r3))
			assert.Contains(t, r3.Text, "MARK-x2")
			assert.NotContains(t, r3.Text, "MARK-x3", "the original does not see the fork")
			f2, err := cold(adapters.Input{Prompt: "branch again MARK-x5", Continue: f.Conversation})
			require.NoError(t, err, "output: %s", resTail(f2))
			assert.Contains(t, f2.Text, "MARK-x3")
			assert.NotContains(t, f2.Text, "MARK-x4", "the fork does not see the original's later turns")
		})
	}
}

// TestClaudeReseedAfterMissingConversation: a stored conversation whose CLI
// files cannot be found by the CLI (here: the archive holds only Outpost's
// transcript) is a session error; with Reseed the turn is retried once in
// a new conversation that carries the transcript.
func TestClaudeReseedAfterMissingConversation(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	e := hostEnv(t, bin)
	srv := server(t)
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	in := adapters.Input{Prompt: "first MARK-s1", Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: "k"}}
	r1, err := harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in, Provider: e.provider, Store: store})
	require.NoError(t, err)

	// Keep only the transcript: the CLI's own session file is gone.
	m, rc, err := store.Load(context.Background(), r1.Conversation)
	require.NoError(t, err)
	files, err := conversation.ReadFiles(rc)
	require.NoError(t, err)
	var only []conversation.File
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".jsonl") || strings.Contains(f.Path, "outpost-transcript") {
			only = append(only, f)
		}
	}
	archive, err := conversation.WriteFiles(only)
	require.NoError(t, err)
	_, err = store.Save(context.Background(), m, bytes.NewReader(archive))
	require.NoError(t, err)

	in.Prompt, in.Continue = "second MARK-s2", r1.Conversation
	_, err = harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in, Provider: e.provider, Store: store})
	require.Error(t, err)
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "without re-seed: a session error")

	res, err := harness.Run(context.Background(), harness.Turn{Adapter: claude.New(), Input: in, Provider: e.provider, Store: store, Reseed: true})
	require.NoError(t, err, "stderr: %s", resTail(res))
	assert.NotEqual(t, r1.Conversation, res.Conversation, "a new conversation")
	assert.Contains(t, res.Text, "MARK-s1", "it carries the earlier turn")
	assert.Contains(t, res.Text, "MARK-s2")
	assert.Contains(t, strings.Join(res.Warnings, " "), "re")
}
