package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

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
	seen := map[string]bool{}
	for id := in.Continue; id != "" && len(lineage) < maxLineage; {
		if seen[id] {
			// Manifests edited into a loop: restoring would never end.
			return outposterr.New(outposterr.Session,
				"conversation %s: its parents loop back to %s (corrupt or edited manifests); refusing to restore it", in.Continue, id)
		}
		seen[id] = true
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
		if m.Parent == id {
			return outposterr.New(outposterr.Session,
				"conversation %s names itself as its parent (a corrupt or edited manifest); refusing to restore it", id)
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

// restoreOne restores one stored conversation into sb's home. The archive
// is checked whole first — every file must be one the adapter declares as
// conversation storage ([conversation.Allowed]) — so a refused archive
// writes nothing; then it streams into the sandbox, relocated.
func restoreOne(ctx context.Context, a adapters.Adapter, store conversation.Store, sb sandbox.Sandbox, in adapters.Input, id string) error {
	st := a.(adapters.Storage)
	m, err := checkStored(ctx, a, store, st, id)
	if err != nil {
		return err
	}
	_, rc, err := store.Load(ctx, id)
	if err != nil {
		return err
	}
	defer rc.Close()
	relocate := m.Cwd != "" && in.Workdir != "" && m.Cwd != in.Workdir
	allow := conversation.Allowlist(st, id, m.Cwd)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := func() error {
			ar := conversation.NewReader(rc, allow)
			w := conversation.NewWriter(pw)
			for {
				e, err := ar.Next()
				if errors.Is(err, io.EOF) {
					return w.Close()
				}
				if err != nil {
					return err
				}
				if e.Path == conversation.TranscriptPath {
					continue // Outpost's own record stays in the store
				}
				if !relocate {
					if err := w.Create(e.Path, e.Size); err != nil {
						return err
					}
					if _, err := io.CopyN(w, ar, e.Size); err != nil {
						return err
					}
					continue
				}
				content, err := io.ReadAll(io.LimitReader(ar, conversation.MaxEntryBytes))
				if err != nil {
					return err
				}
				p, content := st.Relocate(e.Path, content, m.Cwd, in.Workdir)
				if !conversation.Allowed(st, id, in.Workdir, p) || p == conversation.TranscriptPath {
					return outposterr.New(outposterr.Session, "conversation %s: relocated path %q is not a conversation file", m.ID, p)
				}
				if err := w.Create(p, int64(len(content))); err != nil {
					return err
				}
				if _, err := w.Write(content); err != nil {
					return err
				}
			}
		}()
		_ = pw.CloseWithError(err)
		done <- err
	}()
	cerr := sb.CopyIn(ctx, sb.Home(), pr)
	_ = pr.CloseWithError(errors.New("restore stopped"))
	if err := <-done; err != nil {
		if _, ok := outposterr.As(err); ok {
			return err
		}
		return outposterr.Wrap(outposterr.Session, err, "restore conversation %s", m.ID)
	}
	if cerr != nil {
		return outposterr.Wrap(outposterr.Session, cerr, "restore conversation %s", m.ID)
	}
	return nil
}

// checkStored reads stored conversation id whole without writing anything:
// it must belong to the adapter, hold only the adapter's conversation files
// and be within the limits.
func checkStored(ctx context.Context, a adapters.Adapter, store conversation.Store, st adapters.Storage, id string) (conversation.Manifest, error) {
	m, rc, err := store.Load(ctx, id)
	if err != nil {
		return m, err
	}
	defer rc.Close()
	if m.Agent != "" && m.Agent != a.Name() {
		return m, outposterr.New(outposterr.Session, "conversation %s belongs to %s, not %s", m.ID, m.Agent, a.Name())
	}
	ar := conversation.NewReader(rc, conversation.Allowlist(st, id, m.Cwd))
	for {
		if _, err := ar.Next(); errors.Is(err, io.EOF) {
			return m, nil
		} else if err != nil {
			return m, err
		}
	}
}

// errMissing wraps the error of a path that could not be copied out at all.
var errMissing = errors.New("not copied out")

// errNoTranscript stops a capture whose required path yielded nothing.
var errNoTranscript = errors.New("transcript unavailable")

// captureConversation streams the conversation the turn reported out of
// the sandbox into the store, also after failures: only the files the
// adapter declares for it ([conversation.Allowed]), each at most
// conversation.MaxEntryBytes, the whole at most
// conversation.MaxArchiveBytes. A file skipped and a conversation not
// stored are reported as warnings. A capture stops when no byte came out
// of the sandbox for captureStall: a large conversation on a slow or
// loaded machine is not cut off by a fixed time, a stuck one is. Every
// secret of red (the turn's output redactor; nil: none) is overwritten in
// the files by a mask of its own length, so what the store keeps does not
// hold it and the CLI can still read what it continues.
func captureConversation(ctx context.Context, a adapters.Adapter, store conversation.Store, sb sandbox.Sandbox, in adapters.Input, res *Result, red *outputRedactor) {
	st, ok := a.(adapters.Storage)
	if store == nil || !ok || res.Conversation == "" || !conversation.ValidID(res.Conversation) {
		return
	}
	ctx, moved, stop := stallContext(ctx, captureStall)
	defer stop()
	sb = progressSandbox{Sandbox: sb, moved: moved}
	id := res.Conversation
	transcript := appendTranscript(ctx, store, in, res)
	red.maskInPlace(transcript)
	allow := conversation.Allowlist(st, id, in.Workdir)
	pr, pw := io.Pipe()
	var skipped []string
	done := make(chan error, 1)
	go func() {
		err := func() error {
			w := conversation.NewWriter(pw)
			for i, rel := range st.ConversationPaths(id, in.Workdir) {
				n, err := copyOutFiles(ctx, sb, rel, allow, w, &skipped, red)
				switch {
				case i == 0 && (err != nil || n == 0):
					return errNoTranscript
				case errors.Is(err, errMissing):
					// An optional path (a sidecar) the CLI did not write.
				case err != nil:
					return err
				}
			}
			if err := w.Create(conversation.TranscriptPath, int64(len(transcript))); err != nil {
				return err
			}
			if _, err := w.Write(transcript); err != nil {
				return err
			}
			return w.Close()
		}()
		_ = pw.CloseWithError(err)
		done <- err
	}()
	m := conversation.Manifest{ID: id, Agent: res.Agent, CLIVersion: res.CLIVersion,
		Cwd: in.Workdir, Failed: res.Err != nil, UsageTotal: res.cumulative}
	if in.Fork && id != in.Continue {
		m.Parent = in.Continue
	}
	_, serr := store.Save(ctx, m, pr)
	_ = pr.CloseWithError(errors.New("capture stopped"))
	perr := <-done
	for _, s := range skipped {
		res.Warnings = append(res.Warnings, "conversation "+id+": "+s)
	}
	switch {
	case serr != nil && errors.Is(context.Cause(ctx), errStalled):
		res.Warnings = append(res.Warnings, fmt.Sprintf("conversation %s not stored: the copy out of the sandbox stalled (no byte for %s)", id, captureStall))
	case errors.Is(perr, errNoTranscript) || errors.Is(serr, errNoTranscript):
		res.Warnings = append(res.Warnings, "agent emitted conversation "+id+" but its transcript is unavailable")
	case serr != nil:
		res.Warnings = append(res.Warnings, "conversation "+id+" not stored: "+serr.Error())
	}
}

// errStalled is the cause of a capture stopped for lack of progress.
var errStalled = errors.New("stalled")

// stallContext returns a context cancelled (cause errStalled) once moved
// has not been called for idle, and a stop that releases it.
func stallContext(parent context.Context, idle time.Duration) (context.Context, func(), context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	timer := time.AfterFunc(idle, func() { cancel(errStalled) })
	return ctx, func() { timer.Reset(idle) }, func() { timer.Stop(); cancel(nil) }
}

// progressSandbox reports every read of a stream copied out of the
// sandbox as progress.
type progressSandbox struct {
	sandbox.Sandbox
	moved func()
}

func (s progressSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := s.Sandbox.CopyOut(ctx, p)
	if err != nil {
		return nil, err
	}
	return progressReader{rc, s.moved}, nil
}

type progressReader struct {
	io.ReadCloser
	moved func()
}

func (r progressReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.moved()
	}
	return n, err
}

// copyOutFiles streams the regular files under the home-relative path rel
// (a file or a directory) that allow accepts into w, named relative to the
// home, and returns how many it wrote. Other entries are skipped; a file
// over conversation.MaxEntryBytes is skipped and noted in skipped.
func copyOutFiles(ctx context.Context, sb sandbox.Sandbox, rel string, allow func(string) bool, w *conversation.Writer, skipped *[]string, red *outputRedactor) (int, error) {
	rc, err := sb.CopyOut(ctx, path.Join(sb.Home(), rel))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errMissing, err)
	}
	defer rc.Close()
	parent := path.Dir(rel)
	tr := tar.NewReader(rc)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Join(parent, strings.TrimPrefix(h.Name, "./"))
		if !conversation.SafePath(name) || !allow(name) || name == conversation.TranscriptPath {
			continue
		}
		if h.Size > conversation.MaxEntryBytes {
			*skipped = append(*skipped, fmt.Sprintf("skipped %s (%d bytes, over the %d-byte limit per file)", name, h.Size, conversation.MaxEntryBytes))
			continue
		}
		if err := w.Create(name, h.Size); err != nil {
			return n, err
		}
		if _, err := io.CopyN(w, red.masking(tr), h.Size); err != nil {
			return n, err
		}
		n++
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
// archive; restore skips it, a re-seed reads it.
const transcriptPath = conversation.TranscriptPath

// Transcript bounds: the last turns kept, the bytes of the record, and the
// characters a re-seed prompt may carry.
const (
	maxTranscriptTurns = 50
	maxTranscriptBytes = 8 << 20
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
	ar := conversation.NewReader(rc, nil)
	for {
		e, err := ar.Next()
		if err != nil {
			return nil
		}
		if e.Path != transcriptPath {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(ar, maxTranscriptBytes))
		if err != nil {
			return nil
		}
		var out []transcriptLine
		for _, l := range bytes.Split(b, []byte("\n")) {
			var tl transcriptLine
			if json.Unmarshal(l, &tl) == nil {
				out = append(out, tl)
			}
		}
		return out
	}
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
	var enc [][]byte
	total := 0
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		j, _ := json.Marshal(l)
		if len(j)+1 > maxTranscriptBytes/2 {
			// One huge turn keeps its start only.
			l.Prompt, l.Text = truncate(l.Prompt, maxTranscriptBytes/8), truncate(l.Text, maxTranscriptBytes/8)
			j, _ = json.Marshal(l)
		}
		if total+len(j)+1 > maxTranscriptBytes {
			break
		}
		total += len(j) + 1
		enc = append(enc, j)
	}
	var b bytes.Buffer
	for i := len(enc) - 1; i >= 0; i-- {
		b.Write(enc[i])
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// truncate keeps at most n bytes of s, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
