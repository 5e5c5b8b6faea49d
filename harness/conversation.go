package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// maxLineage bounds how many ancestors of a forked conversation are restored.
const maxLineage = 8

// restoreConversation puts the stored conversation in.Continue into sb's
// home, relocated to in.Workdir, after its ancestors (a fork's parent,
// grandparent, …): a CLI may need the thread it was forked from (Codex
// 0.169.0 refuses a fork whose source rollout is missing). A conversation
// the store does not hold is left to the CLI (a warm lease may have it); a
// stored one that cannot be trusted or written is a session error.
func restoreConversation(ctx context.Context, a adapters.Adapter, store conversation.Store, sb sandbox.Sandbox, in adapters.Input) error {
	if _, ok := a.(adapters.Storage); store == nil || !ok || in.Continue == "" {
		return nil
	}
	var lineage []string
	for id := in.Continue; id != "" && len(lineage) < maxLineage; {
		m, err := store.Stat(ctx, id)
		if errors.Is(err, conversation.ErrNotFound) && len(lineage) > 0 {
			break // an ancestor the store lost: restore what there is
		}
		if errors.Is(err, conversation.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		lineage = append(lineage, id)
		id = m.Parent
	}
	for i := len(lineage) - 1; i >= 0; i-- {
		if err := restoreOne(ctx, a, store, sb, in, lineage[i]); err != nil {
			return err
		}
	}
	return nil
}

// restoreOne restores one stored conversation into sb's home.
func restoreOne(ctx context.Context, a adapters.Adapter, store conversation.Store, sb sandbox.Sandbox, in adapters.Input, id string) error {
	st := a.(adapters.Storage)
	m, rc, err := store.Load(ctx, id)
	if err != nil {
		return err
	}
	defer rc.Close()
	if m.Agent != "" && m.Agent != a.Name() {
		return outposterr.New(outposterr.Session, "conversation %s belongs to %s, not %s", m.ID, m.Agent, a.Name())
	}
	files, err := conversation.ReadFiles(rc)
	if err != nil {
		return err
	}
	kept := files[:0]
	for _, f := range files {
		if f.Path != transcriptPath { // Outpost's own record stays in the store
			kept = append(kept, f)
		}
	}
	files = kept
	for i, f := range files {
		p, content := st.Relocate(f.Path, f.Content, m.Cwd, in.Workdir)
		if !conversation.SafePath(p) {
			return outposterr.New(outposterr.Session, "conversation %s: unsafe relocated path %q", m.ID, p)
		}
		files[i].Path, files[i].Content = p, content
	}
	archive, err := conversation.WriteFiles(files)
	if err != nil {
		return err
	}
	if err := sb.CopyIn(ctx, sb.Home(), bytes.NewReader(archive)); err != nil {
		return outposterr.Wrap(outposterr.Session, err, "restore conversation %s", m.ID)
	}
	return nil
}

// captureConversation copies the conversation the turn reported out of
// the sandbox into the store, also after failures. A conversation whose
// transcript is missing is reported as a warning.
func captureConversation(ctx context.Context, a adapters.Adapter, store conversation.Store, sb sandbox.Sandbox, in adapters.Input, res *Result) {
	st, ok := a.(adapters.Storage)
	if store == nil || !ok || res.Conversation == "" || !conversation.ValidID(res.Conversation) {
		return
	}
	var files []conversation.File
	filter, _ := a.(adapters.StorageFilter)
	for i, rel := range st.ConversationPaths(res.Conversation, in.Workdir) {
		got, err := copyOutFiles(ctx, sb, rel)
		if filter != nil {
			kept := got[:0]
			for _, f := range got {
				if filter.Keep(res.Conversation, f.Path) {
					kept = append(kept, f)
				}
			}
			got = kept
		}
		if err != nil || len(got) == 0 {
			if i == 0 {
				res.Warnings = append(res.Warnings, "agent emitted conversation "+res.Conversation+" but its transcript is unavailable")
				return
			}
			continue
		}
		files = append(files, got...)
	}
	files = append(files, conversation.File{Path: transcriptPath, Content: appendTranscript(ctx, store, in, res)})
	archive, err := conversation.WriteFiles(files)
	if err != nil {
		res.Warnings = append(res.Warnings, "capture conversation: "+err.Error())
		return
	}
	m := conversation.Manifest{ID: res.Conversation, Agent: res.Agent, CLIVersion: res.CLIVersion,
		Cwd: in.Workdir, Failed: res.Err != nil, UsageTotal: res.cumulative}
	if in.Fork && res.Conversation != in.Continue {
		m.Parent = in.Continue
	}
	for _, f := range files {
		m.Files = append(m.Files, f.Path)
	}
	if _, err := store.Save(ctx, m, bytes.NewReader(archive)); err != nil {
		res.Warnings = append(res.Warnings, "capture conversation: "+err.Error())
	}
}

// copyOutFiles returns the regular files under the home-relative path rel
// (a file or a directory), named relative to the home.
func copyOutFiles(ctx context.Context, sb sandbox.Sandbox, rel string) ([]conversation.File, error) {
	rc, err := sb.CopyOut(ctx, path.Join(sb.Home(), rel))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	parent := path.Dir(rel)
	tr := tar.NewReader(rc)
	var out []conversation.File
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Join(parent, strings.TrimPrefix(h.Name, "./"))
		if !conversation.SafePath(name) || h.Size > conversation.MaxEntryBytes {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, conversation.MaxEntryBytes))
		if err != nil {
			return out, err
		}
		out = append(out, conversation.File{Path: name, Mode: 0o600, Content: b})
	}
}

// usageBaseline is the conversation-wide usage total before a turn with
// input in, for CLIs that report cumulative counters: zero for a new
// conversation, the stored total for a resumed or forked one, unknown (nil)
// without it.
func usageBaseline(ctx context.Context, store conversation.Store, in adapters.Input) *usage.Usage {
	switch {
	case in.Continue == "":
		return &usage.Usage{}
	case store == nil:
		return nil
	}
	// A fork's counters start from its parent's total (verified with Codex
	// 0.169.0), so the parent's stored total is the baseline either way.
	m, err := store.Stat(ctx, in.Continue)
	if err != nil || m.UsageTotal == nil {
		return nil
	}
	u := *m.UsageTotal
	return &u
}

// transcriptPath is Outpost's own record of a conversation inside its
// archive: one JSON line per turn (prompt and final text). Restore skips it;
// a re-seed reads it.
const transcriptPath = ".outpost-transcript.jsonl"

// Transcript bounds: the last turns kept, and the characters a re-seed
// prompt may carry.
const (
	maxTranscriptTurns = 50
	maxReseedChars     = 12000
)

type transcriptLine struct {
	Prompt string `json:"prompt"`
	Text   string `json:"text"`
}

// storedTranscript returns the transcript lines of a stored conversation.
func storedTranscript(ctx context.Context, store conversation.Store, id string) []transcriptLine {
	if store == nil || id == "" {
		return nil
	}
	_, rc, err := store.Load(ctx, id)
	if err != nil {
		return nil
	}
	defer rc.Close()
	files, err := conversation.ReadFiles(rc)
	if err != nil {
		return nil
	}
	var out []transcriptLine
	for _, f := range files {
		if f.Path != transcriptPath {
			continue
		}
		for _, l := range bytes.Split(f.Content, []byte("\n")) {
			var tl transcriptLine
			if json.Unmarshal(l, &tl) == nil {
				out = append(out, tl)
			}
		}
	}
	return out
}

// appendTranscript is the conversation's transcript after this turn: the
// stored one of the conversation it continued (the parent, for a fork),
// plus this turn, bounded.
func appendTranscript(ctx context.Context, store conversation.Store, in adapters.Input, res *Result) []byte {
	lines := storedTranscript(ctx, store, in.Continue)
	lines = append(lines, transcriptLine{Prompt: in.Prompt, Text: res.Text})
	if len(lines) > maxTranscriptTurns {
		lines = lines[len(lines)-maxTranscriptTurns:]
	}
	var b bytes.Buffer
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// reseedPrompt builds a prompt that carries the stored transcript of id
// (the most recent turns that fit maxReseedChars) before prompt.
func reseedPrompt(ctx context.Context, store conversation.Store, id, prompt string) (string, bool) {
	lines := storedTranscript(ctx, store, id)
	if len(lines) == 0 {
		return "", false
	}
	var parts []string
	total := 0
	for i := len(lines) - 1; i >= 0; i-- {
		p := "User: " + lines[i].Prompt + "\nAssistant: " + lines[i].Text
		if total+len(p) > maxReseedChars {
			break
		}
		parts = append([]string{p}, parts...)
		total += len(p)
	}
	if len(parts) == 0 {
		return "", false
	}
	return "This continues an earlier conversation that could not be restored. Its last turns were:\n\n" +
		strings.Join(parts, "\n\n") + "\n\nNow: " + prompt, true
}
