package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/usage"
)

// flushEvery is how long rendered events may wait in the output buffer: a
// CLI printing millions of lines costs one write per batch, not per line,
// and a reader still sees events within this delay.
const flushEvery = 50 * time.Millisecond

// renderer prints events live: JSON lines, or a human-readable stream.
// Output is buffered and flushed every flushEvery and by close.
type renderer struct {
	mu          sync.Mutex
	out         *bufio.Writer
	json        bool
	inDelta     bool
	lastFailure string
	dirty       bool
	warned      map[string]bool // warning events shown
	offline     bool            // the turn talked to the scripted server
	stop        chan struct{}
	stopped     chan struct{}
}

// newRenderer starts a renderer on w; close flushes and stops it.
func newRenderer(w io.Writer, jsonLines bool) *renderer {
	r := &renderer{out: bufio.NewWriterSize(w, 64<<10), json: jsonLines,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go r.flusher()
	return r
}

func (r *renderer) flusher() {
	defer close(r.stopped)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.mu.Lock()
			if r.dirty {
				_ = r.out.Flush()
				r.dirty = false
			}
			r.mu.Unlock()
		case <-r.stop:
			return
		}
	}
}

// close flushes what is buffered and stops the flusher. Idempotent.
func (r *renderer) close() {
	r.mu.Lock()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	_ = r.out.Flush()
	r.dirty = false
	r.mu.Unlock()
	<-r.stopped
}

func (r *renderer) event(ev adapters.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty = true
	if ev.Kind == adapters.KindWarning {
		if r.warned == nil {
			r.warned = map[string]bool{}
		}
		r.warned[ev.Text] = true
	}
	if r.json {
		b, err := json.Marshal(ev)
		if err == nil {
			r.writeJSON(b)
		}
		return
	}
	if ev.Kind != adapters.KindTextDelta && r.inDelta {
		r.printf("\n")
		r.inDelta = false
	}
	switch ev.Kind {
	case adapters.KindConversation:
		extra := ""
		if ev.Model != "" {
			extra += " model=" + ev.Model
		}
		if ev.Version != "" {
			extra += " cli=" + ev.Version
		}
		r.printf("· conversation %s%s\n", ev.Conversation, extra)
	case adapters.KindText:
		r.printf("%s\n", ev.Text)
	case adapters.KindTextDelta:
		r.printf("%s", ev.Text)
		r.inDelta = true
	case adapters.KindReasoning:
		r.printf("  (thinking) %s\n", oneLine(ev.Text, 200))
	case adapters.KindTool:
		r.printf("→ %s %s\n", ev.Tool.Name, oneLine(string(ev.Tool.Input), 200))
	case adapters.KindToolResult:
		mark := "←"
		if ev.ToolResult.IsError {
			mark = "← error:"
		}
		r.printf("%s %s\n", mark, oneLine(ev.ToolResult.Preview, 200))
	case adapters.KindFileChange:
		r.printf("✎ %s %s\n", ev.FileChange.Change, ev.FileChange.Path)
	case adapters.KindRetry:
		r.printf("↻ CLI retrying (attempt %d/%d, status %d %s)\n", ev.Retry.Attempt, ev.Retry.MaxAttempts, ev.Retry.Status, ev.Retry.Reason)
	case adapters.KindQuota:
		reset := ""
		if !ev.Quota.ResetAt.IsZero() {
			reset = " resets " + ev.Quota.ResetAt.Format(time.RFC3339)
		}
		mark := "!"
		if !ev.Quota.Blocking() {
			mark = "·"
		}
		r.printf("%s rate limit %s%s %s\n", mark, ev.Quota.Status, reset, ev.Text)
	case adapters.KindWarning:
		r.printf("! warning: %s\n", ev.Text)
	case adapters.KindFailure:
		// Claude reports one failure twice (synthetic message, then result).
		if ev.Text != r.lastFailure {
			r.printf("✗ %s\n", oneLine(ev.Text, 500))
		}
		r.lastFailure = ev.Text
	case adapters.KindStderr:
		r.printf("  stderr: %s\n", oneLine(ev.Text, 500))
	case adapters.KindInput:
		r.printf("» %s\n", oneLine(ev.Text, 500))
	case adapters.KindResult, adapters.KindUsage, adapters.KindFinished, adapters.KindRaw:
		// The result text and usage are summarized at the end.
	}
}

// outcome prints the warnings no event carried (a conversation not
// captured, say), then the final verdict.
func (r *renderer) outcome(res *harness.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty = true
	for _, w := range res.Warnings {
		if r.warned[w] {
			continue
		}
		if r.json {
			b, _ := json.Marshal(adapters.Event{Kind: adapters.KindWarning, Text: w})
			r.writeJSON(b)
		} else {
			if r.inDelta {
				r.printf("\n")
				r.inDelta = false
			}
			r.printf("! warning: %s\n", w)
		}
	}
	o := res.Outcome()
	if r.json {
		b, _ := json.Marshal(o)
		r.writeJSON(b)
		return
	}
	if r.inDelta {
		r.printf("\n")
	}
	if o.OK && res.Text != "" && res.Counts[adapters.KindText] == 0 {
		r.printf("%s\n", res.Text)
	}
	u := o.Usage
	cost := "unknown"
	switch {
	case u.CostKnown && r.offline:
		// Nothing was billed: the scripted server's tokens at list prices.
		cost = fmt.Sprintf("~$%.4f (list-price estimate of scripted traffic)", u.CostUSD)
	case u.CostKnown && u.CostSource == usage.CostSourceEstimate:
		cost = fmt.Sprintf("~$%.4f (list-price estimate)", u.CostUSD)
	case u.CostKnown:
		cost = fmt.Sprintf("$%.4f", u.CostUSD)
	}
	usageLine := fmt.Sprintf("tokens in=%d cached=%d out=%d cost=%s", u.Input+u.CacheCreated, u.Cached, u.Output, cost)
	if !u.Complete {
		usageLine += " (incomplete)"
	}
	if o.OK {
		r.printf("✔ ok  conversation=%s  %s  %s\n", o.Conversation, usageLine, res.Duration.Round(time.Millisecond))
		return
	}
	line := fmt.Sprintf("✖ %s: %s", o.Class, strings.TrimPrefix(o.Error, o.Class+": "))
	for _, n := range o.Notes() {
		line += "  [" + n + "]"
	}
	if o.Conversation != "" {
		line += "  conversation=" + o.Conversation
	}
	r.printf("%s\n", line)
}

// writeJSON writes one JSON line as it is: --json output is exact (JSON
// escapes C0 controls itself; nothing else is altered).
func (r *renderer) writeJSON(b []byte) {
	_, _ = r.out.Write(b)
	_ = r.out.WriteByte('\n')
}

// printf writes human-mode output with the text it carries neutralized for
// the terminal (termSafe): an agent's text, tool input, errors and ids may
// hold escape sequences meant to steer the terminal; the renderer's own
// formats hold no control character but newline.
func (r *renderer) printf(format string, a ...any) {
	_, _ = r.out.WriteString(termSafe(fmt.Sprintf(format, a...)))
}

// oneLine is s with its white space folded, cut to at most n bytes at a
// character's start.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}
