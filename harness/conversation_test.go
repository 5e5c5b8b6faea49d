package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
)

// storeTurn is fakeTurn with the storage-keeping fake and a store.
func storeTurn(t *testing.T, store conversation.Store, script string) Turn {
	t.Helper()
	turn := fakeTurn(t, script)
	turn.Adapter = fakecli.NewStorage(turn.Adapter.Binary())
	turn.Store = store
	return turn
}

func texts(res *Result) string {
	var b strings.Builder
	for _, ev := range res.Events {
		if ev.Kind == adapters.KindText {
			b.WriteString(ev.Text + "\n")
		}
	}
	return b.String()
}

const finished = `emit {"type":"finished","ok":true}`

// TestCaptureOnlyDeclaredFiles: capture carries the conversation's own
// files across leases; a hook, a shell startup file and another
// conversation's files written beside them stay behind.
func TestCaptureOnlyDeclaredFiles(t *testing.T) {
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	res, err := Run(context.Background(), storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
write .fake/sessions/c1.jsonl 10
write .fake/sessions/c1/sidecar 5
write .fake/sessions/c2.jsonl 3
write .bashrc 4
put `+fakecli.HookFile+` touch /nonexistent/x
`+finished+`
`))
	require.NoError(t, err)
	require.Empty(t, res.Warnings)
	m, err := store.Stat(context.Background(), "c1")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{".fake/sessions/c1.jsonl", ".fake/sessions/c1/sidecar", conversation.TranscriptPath}, m.Files)

	// The rc file and the hook written in turn 1's home do not travel.
	turn := storeTurn(t, store, `cat .fake/sessions/c1.jsonl
cat .fake/sessions/c1/sidecar
cat .bashrc
cat `+fakecli.HookFile+`
hooks
`+finished)
	turn.Input.Continue = "c1"
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	out := texts(res)
	assert.Contains(t, out, ".fake/sessions/c1.jsonl: xxxxxxxxxx\n")
	assert.Contains(t, out, ".fake/sessions/c1/sidecar: xxxxx\n")
	assert.Contains(t, out, fakecli.HookFile+" missing")
	assert.Contains(t, out, ".bashrc missing")
}

// plantStored writes a conversation into a store directory as an attacker
// with write access to it (or an archive from elsewhere) would: files
// the adapter never declared, correct digest.
func plantStored(t *testing.T, dir string, m conversation.Manifest, files ...conversation.File) {
	t.Helper()
	tr, err := conversation.WriteFiles(files)
	require.NoError(t, err)
	enc, _ := zstd.NewWriter(nil)
	archive := enc.EncodeAll(tr, nil)
	enc.Close()
	sum := sha256.Sum256(archive)
	m.SHA256, m.Size, m.Format = hex.EncodeToString(sum[:]), int64(len(archive)), conversation.Format
	b, _ := json.Marshal(m)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.ID+".json"), b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.ID+".tar.zst"), archive, 0o600))
}

// TestRestoreRefusesUndeclaredFiles: a stored archive carrying a hook or a
// shell startup file is a session error before the CLI starts, and nothing
// of it reaches the sandbox: the hook's marker never appears. The control
// case (the same hook written by the CLI itself) shows the hook would run.
func TestRestoreRefusesUndeclaredFiles(t *testing.T) {
	dir := t.TempDir()
	store, err := conversation.NewFileStore(dir, nil)
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "HOOK-RAN")
	hook := []byte("touch " + marker + "\n")

	res, err := Run(context.Background(), storeTurn(t, store, "put "+fakecli.HookFile+" touch "+marker+"\nhooks\n"+finished))
	require.NoError(t, err)
	require.FileExists(t, marker, "control: a hook in place runs")
	require.NoError(t, os.Remove(marker))
	require.Empty(t, res.Warnings)

	for name, files := range map[string][]conversation.File{
		"hook":     {{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")}, {Path: fakecli.HookFile, Content: hook}},
		"rc file":  {{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")}, {Path: ".bashrc", Content: hook}},
		"other id": {{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")}, {Path: ".fake/sessions/c9.jsonl", Content: hook}},
		"profile":  {{Path: ".profile", Content: hook}},
	} {
		plantStored(t, dir, conversation.Manifest{ID: "c1", Agent: "fake-store"}, files...)
		turn := storeTurn(t, store, "hooks\ncat .fake/sessions/c1.jsonl\n"+finished)
		turn.Input.Continue = "c1"
		res, err := Run(context.Background(), turn)
		require.Error(t, err, name)
		assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), "not a conversation file", name)
		assert.Zero(t, res.Counts[adapters.KindText], "%s: the CLI never ran", name)
		assert.NoFileExists(t, marker, name)
	}

	// A conversation of another agent is refused too.
	plantStored(t, dir, conversation.Manifest{ID: "c1", Agent: "claude"},
		conversation.File{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")})
	turn := storeTurn(t, store, "hooks\n"+finished)
	turn.Input.Continue = "c1"
	_, err = Run(context.Background(), turn)
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%v", err)

	// Declared files are restored (the fake never runs a hook from its
	// session directory).
	plantStored(t, dir, conversation.Manifest{ID: "c1", Agent: "fake-store"},
		conversation.File{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")},
		conversation.File{Path: ".fake/sessions/c1/hook.sh", Content: hook})
	turn = storeTurn(t, store, "hooks\ncat .fake/sessions/c1/hook.sh\n"+finished)
	turn.Input.Continue = "c1"
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Contains(t, texts(res), "touch "+marker, "a declared file is restored")
	assert.NoFileExists(t, marker)
}

// TestCaptureOverLimitWarns: a conversation whose files exceed the store's
// limit is not stored (the previous version stays) and the turn says so;
// a file over the per-file limit is skipped and said.
func TestCaptureOverLimitWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400 MiB")
	}
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	res, err := Run(context.Background(), storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
write .fake/sessions/c1.jsonl 10
`+finished))
	require.NoError(t, err)
	require.Empty(t, res.Warnings)

	turn := storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
write .fake/sessions/c1.jsonl 20
write .fake/sessions/c1/a 125829120
write .fake/sessions/c1/b 125829120
write .fake/sessions/c1/c 134217729
write .fake/sessions/c1/d 20971520
`+finished)
	turn.Input.Continue = "c1"
	res, err = Run(context.Background(), turn)
	require.NoError(t, err, "a capture problem does not fail the turn")
	all := strings.Join(res.Warnings, "\n")
	assert.Contains(t, all, "skipped .fake/sessions/c1/c")
	assert.Contains(t, all, "conversation c1 not stored")
	assert.Contains(t, all, "larger than")
	_, rc, err := store.Load(context.Background(), "c1")
	require.NoError(t, err)
	files, err := conversation.ReadFiles(rc)
	rc.Close()
	require.NoError(t, err)
	require.NotEmpty(t, files)
	assert.Equal(t, ".fake/sessions/c1.jsonl", files[0].Path)
	assert.Len(t, files[0].Content, 10, "the previous version stays")
}

// TestCaptureMissingTranscriptWarns: a conversation whose required file is
// missing is a warning, and nothing is stored.
func TestCaptureMissingTranscriptWarns(t *testing.T) {
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	res, err := Run(context.Background(), storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
write .fake/sessions/c1/only-sidecar 3
`+finished))
	require.NoError(t, err)
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "transcript is unavailable")
	list, _ := store.List(context.Background())
	assert.Empty(t, list)
}

// TestRestoreRefusesParentLoops: manifests edited so that a conversation's
// parents lead back to it (a names b, b names a; or one names itself) are a
// session error before the CLI starts — never an endless or repeated
// restore — and the stored conversations are kept.
func TestRestoreRefusesParentLoops(t *testing.T) {
	dir := t.TempDir()
	store, err := conversation.NewFileStore(dir, nil)
	require.NoError(t, err)
	session := func(id string) conversation.File {
		return conversation.File{Path: ".fake/sessions/" + id + ".jsonl", Content: []byte("{}")}
	}
	plantStored(t, dir, conversation.Manifest{ID: "a", Agent: "fake-store", Parent: "b"}, session("a"))
	plantStored(t, dir, conversation.Manifest{ID: "b", Agent: "fake-store", Parent: "a"}, session("b"))
	plantStored(t, dir, conversation.Manifest{ID: "s", Agent: "fake-store", Parent: "s"}, session("s"))
	for id, msg := range map[string]string{"a": "its parents loop back to a", "s": "names itself as its parent"} {
		turn := storeTurn(t, store, "emit {\"type\":\"text\",\"text\":\"CLI-RAN\"}\n"+finished)
		turn.Input.Continue = id
		res, err := Run(context.Background(), turn)
		require.Error(t, err, id)
		assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), "%s: %v", id, err)
		assert.Contains(t, err.Error(), msg, id)
		assert.Zero(t, res.Counts[adapters.KindText], "%s: the CLI never ran", id)
		_, err = store.Stat(context.Background(), id)
		assert.NoError(t, err, "%s is kept", id)
	}
}
