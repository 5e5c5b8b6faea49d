package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

// hookSettings is a Claude Code settings file whose hooks write HOOK-RAN
// in the working directory (the workspace).
const hookSettings = `{"hooks":{
 "SessionStart":[{"hooks":[{"type":"command","command":"touch HOOK-RAN"}]}],
 "UserPromptSubmit":[{"hooks":[{"type":"command","command":"touch HOOK-RAN"}]}]}}`

// TestPlantedHookNeverRuns: a stored conversation whose archive carries a
// Claude settings file with hooks is refused (a session error) before
// Claude starts, on the host and in Docker, and the hook's marker never
// appears. The control shows that Claude runs that hook when the settings
// file is in its home.
func TestPlantedHookNeverRuns(t *testing.T) {
	testenv.Short(t)
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			srv := server(t)

			// Control: the same settings file placed in the home runs its hook.
			sb, ws := leaseIn(t, e)
			tr, err := conversation.WriteFiles([]conversation.File{{Path: ".claude/settings.json", Content: []byte(hookSettings)}})
			require.NoError(t, err)
			require.NoError(t, sb.CopyIn(context.Background(), sb.Home(), bytes.NewReader(tr)))
			res, err := turn(t, sb, srv, adapters.Input{Prompt: "control MARK-h0"}, false)
			require.NoError(t, err, "stderr: %s", resTail(res))
			require.FileExists(t, filepath.Join(ws, "HOOK-RAN"), "control: Claude runs the hook")

			// The planted archive: a transcript and the settings file.
			store := t.TempDir()
			s, err := conversation.NewFileStore(store, nil)
			require.NoError(t, err)
			cwd := "/workspace"
			if e.name == "host" {
				cwd = workspace(t)
			}
			id := "0b7c2a4e-6a1f-4c55-9d1e-planted00001"
			tr, err = conversation.WriteFiles([]conversation.File{
				{Path: ".claude/projects/" + claude.ProjectKey(cwd) + "/" + id + ".jsonl", Content: []byte(`{"type":"user","cwd":"` + cwd + `"}` + "\n")},
				{Path: ".claude/settings.json", Content: []byte(hookSettings)},
			})
			require.NoError(t, err)
			enc, _ := zstd.NewWriter(nil)
			archive := enc.EncodeAll(tr, nil)
			enc.Close()
			sum := sha256.Sum256(archive)
			m := conversation.Manifest{ID: id, Agent: "claude", Cwd: cwd, Format: conversation.Format,
				SHA256: hex.EncodeToString(sum[:]), Size: int64(len(archive))}
			mb, _ := json.Marshal(m)
			require.NoError(t, os.WriteFile(filepath.Join(store, id+".json"), mb, 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(store, id+".tar.zst"), archive, 0o600))

			before := len(srv.ModelRequests())
			spec := e.spec
			spec.Workspace = workspace(t)
			one := 1
			res, err = harness.Run(context.Background(), harness.Turn{Adapter: claude.New(),
				Input: adapters.Input{Prompt: "resume MARK-h1", Continue: id, MaxRetries: &one,
					Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
				Provider: e.provider, Spec: spec, Store: s, Limits: harness.Limits{Deadline: 2 * time.Minute}})
			require.Error(t, err)
			assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)
			assert.Contains(t, err.Error(), "not a conversation file")
			assert.NoFileExists(t, filepath.Join(spec.Workspace, "HOOK-RAN"), "the planted hook never ran")
			assert.Equal(t, before, len(srv.ModelRequests()), "Claude never started")
			assert.Zero(t, res.Counts[adapters.KindConversation])
		})
	}
}
