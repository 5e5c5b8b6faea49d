package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

// maxFailures bounds the failure events remembered for classification.
const maxFailures = 32

// textMatch is a recognizer hit with the instant its text was seen.
type textMatch struct {
	text    string
	reason  string
	resetAt time.Time
	at      time.Time
}

// collector turns one turn's output into events and the facts classification
// needs. Run and Replay share it, so a replayed log is judged exactly like a
// live turn. It is used from one goroutine.
type collector struct {
	adapter adapters.Adapter
	dec     adapters.Decoder
	now     func() time.Time
	onEvent func(adapters.Event)
	keep    bool

	seq    int64
	res    *Result
	ledger usage.Ledger
	limits Limits

	// texts holds the main agent's text events, at most limits.TextBytes
	// in all; textCut says some were left out.
	texts      []string
	textBytes  int
	textCut    bool
	resultText string
	haveResult bool
	// unkept counts events Result.Events had no room for.
	unkept    int
	finished  *adapters.FinishedDetail
	failures  []adapters.Event
	blocking  *adapters.Event // last blocking quota event
	lastRetry *adapters.RetryNotice
	// quotaChatter is set when a retry notice proves a quota failure.
	quotaChatter *textMatch
	stderrQuota  *textMatch // first stderr line that reads as quota
	stderrOut    *textMatch // first stderr line that reads as an outage
	stderrAuth   *textMatch // first stderr line that reads as an auth failure
	lastStderr   string
	// stderrSession is the first stderr line saying the conversation is missing.
	stderrSession string
	// output is set by the first line of either stream.
	output bool
	// probe is the workspace probe's report when it found the workspace
	// unwritable (the stderr line after probeMarker; see probeScript).
	probe string

	stdoutTail, stderrTail *tail
	// redact removes the CLI's secrets from every line first (nil: none);
	// leaked is set once it removed one.
	redact *outputRedactor
	leaked bool

	// model prices the running cost when the CLI has not named its model
	// yet (the input's, else the adapter's default).
	model string
	// turns counts the main agent's assistant turns; awaiting says the
	// next model output starts a new one.
	turns    int
	awaiting bool
	// over is set once the turn passed a cap of Limits (MaxCostUSD,
	// MaxTurns); the harness then stops the CLI.
	over *budgetHit
}

// budgetHit is a cap the running turn reached.
type budgetHit struct {
	reason string // "cost", "tokens" or "turns"
	text   string
}

func newCollector(a adapters.Adapter, now func() time.Time, onEvent func(adapters.Event), keep bool, lim Limits, res *Result) *collector {
	return &collector{
		adapter: a, dec: a.NewDecoder(), now: now, onEvent: onEvent, keep: keep, res: res, limits: lim,
		stdoutTail: newTail(lim.TailBytes), stderrTail: newTail(lim.TailBytes), awaiting: true,
	}
}

// stdoutLine decodes one stdout line (without its newline).
func (c *collector) stdoutLine(line []byte) {
	line = c.redacted(line)
	c.output = true
	c.stdoutTail.writeLine(line)
	for _, ev := range c.dec.Decode(line) {
		c.emit(ev)
	}
}

// redacted is line without the lease's secrets. The first time the CLI
// printed one, a warning says so: an agent that shows its own key may be
// following instructions planted in what it read.
func (c *collector) redacted(line []byte) []byte {
	line, found := c.redact.line(line)
	if found && !c.leaked {
		c.leaked, c.res.SecretPrinted = true, true
		c.warn(secretPrintedWarning)
	}
	return line
}

// stderrLine records one stderr line.
func (c *collector) stderrLine(line []byte) {
	if rest, ok := bytes.CutPrefix(line, []byte(probeMarker)); ok && !c.output {
		// Before any output of the CLI's: the probe's, which then exits
		// without starting the CLI.
		c.probe, c.output = string(rest), true
		return
	}
	line = c.redacted(line)
	c.output = true
	c.stderrTail.writeLine(line)
	text := strings.TrimRight(string(line), "\r")
	if strings.TrimSpace(text) == "" {
		return
	}
	ev := c.emit(adapters.Event{Kind: adapters.KindStderr, Text: text})
	c.lastStderr = text
	// Recognizers run on every stderr line as it arrives, but their verdicts
	// are used only if the turn fails.
	if c.stderrQuota == nil {
		if ok, reset := c.adapter.Quota(text, ev.Time); ok {
			c.stderrQuota = &textMatch{text: text, resetAt: reset, at: ev.Time}
		}
	}
	if c.stderrOut == nil {
		if r, ok := c.adapter.Unavailable(text); ok {
			c.stderrOut = &textMatch{text: text, reason: r, at: ev.Time}
		}
	}
	if sr, ok := c.adapter.(adapters.SessionRecognizer); ok && c.stderrSession == "" && sr.SessionMissing(text) {
		c.stderrSession = text
	}
	if c.stderrAuth == nil {
		if r, ok := c.adapter.Auth(text); ok {
			c.stderrAuth = &textMatch{text: text, reason: r, at: ev.Time}
		}
	}
}

// warn emits a harness warning event and records it on the result.
func (c *collector) warn(text string) {
	c.res.Warnings = append(c.res.Warnings, text)
	c.emit(adapters.Event{Kind: adapters.KindWarning, Text: text})
}

// emit stamps ev with its sequence number and time, folds it into the
// result, and hands it to the caller.
func (c *collector) emit(ev adapters.Event) adapters.Event {
	c.seq++
	ev.Seq = c.seq
	if len(ev.Raw) > 0 && !json.Valid(ev.Raw) {
		// A raw line that is not JSON travels as a JSON string, so events
		// always marshal.
		q, _ := json.Marshal(string(ev.Raw))
		ev.Raw = q
	}
	ev.Time = c.now()
	if c.res.Counts == nil {
		c.res.Counts = map[adapters.Kind]int{}
	}
	c.res.Counts[ev.Kind]++
	switch ev.Kind {
	case adapters.KindConversation:
		if ev.Conversation != "" && ev.Subagent == "" {
			c.res.Conversation = ev.Conversation
		}
		if ev.Version != "" {
			c.res.CLIVersion = ev.Version
		}
		if ev.Model != "" {
			c.res.Model = ev.Model
		}
	case adapters.KindText:
		if ev.Subagent == "" {
			c.addText(ev.Text)
		}
	case adapters.KindResult:
		c.resultText, c.haveResult = ev.Text, true
		if len(c.resultText) > c.limits.TextBytes {
			c.resultText = adapters.Preview(c.resultText, c.limits.TextBytes)
			c.textCut = true
		} else {
			// The final event's text wins over accumulated pieces.
			c.textCut = false
		}
	case adapters.KindUsage:
		if ev.Usage != nil && ev.Subagent == "" {
			c.ledger.Add(*ev.Usage)
		} else if ev.Usage != nil && ev.Usage.Scope == usage.ScopeMessage {
			// Sub-agent messages cost tokens too; they have their own ids.
			c.ledger.Add(*ev.Usage)
		}
		c.checkCost()
	case adapters.KindFailure:
		if len(c.failures) == maxFailures {
			c.failures = append(c.failures[:0], c.failures[1:]...)
		}
		c.failures = append(c.failures, ev)
	case adapters.KindQuota:
		if ev.Quota.Blocking() {
			e := ev
			c.blocking = &e
		}
	case adapters.KindRetry:
		c.lastRetry = ev.Retry
		if c.quotaChatter == nil && ev.Retry != nil {
			// The CLI is retrying a call its own words, or a refusal it
			// already signalled, prove to be a quota failure.
			if ok, reset := c.adapter.Quota(ev.Retry.Reason, ev.Time); ok {
				c.quotaChatter = &textMatch{text: ev.Retry.Reason, resetAt: reset, at: ev.Time}
			} else if c.blocking != nil {
				c.quotaChatter = &textMatch{text: "rate limit " + c.blocking.Quota.Status, resetAt: c.blocking.Quota.ResetAt, at: ev.Time}
			}
		}
	case adapters.KindFinished:
		f := adapters.FinishedDetail{}
		if ev.Finished != nil {
			f = *ev.Finished
		}
		c.finished = &f
	}
	c.countTurn(ev)
	if c.keep {
		if len(c.res.Events) < c.limits.KeptEvents {
			c.res.Events = append(c.res.Events, ev)
		} else {
			c.unkept++
		}
	}
	if c.onEvent != nil {
		c.onEvent(ev)
	}
	return ev
}

// countTurn counts the main agent's assistant turns: model output after
// the start or after a tool result begins one. Past Limits.MaxTurns the
// turn is over its cap.
func (c *collector) countTurn(ev adapters.Event) {
	if ev.Subagent != "" {
		return
	}
	switch ev.Kind {
	case adapters.KindText, adapters.KindTextDelta, adapters.KindReasoning, adapters.KindTool:
		if c.awaiting {
			c.awaiting = false
			c.turns++
			if max := c.limits.MaxTurns; max > 0 && c.turns > max && c.over == nil {
				c.over = &budgetHit{reason: "turns", text: fmt.Sprintf("the agent started assistant turn %d of at most %d", c.turns, max)}
			}
		}
	case adapters.KindToolResult:
		c.awaiting = true
	}
}

// runningCost is the turn's cost so far: the CLI's reported cost, else the
// list price of the tokens reported so far; known is false when tokens were
// reported that nothing prices.
func (c *collector) runningCost() (cost float64, known bool) {
	u := c.ledger.Total()
	if u.CostKnown {
		return u.CostUSD, true
	}
	if u.Tokens() == 0 {
		return 0, true
	}
	model := c.res.Model
	if model == "" {
		model = c.model
	}
	return usage.Estimate(model, u)
}

// checkCost marks the turn over its cost or token cap.
func (c *collector) checkCost() {
	if c.over != nil {
		return
	}
	if max := c.limits.MaxTokens; max > 0 {
		if n := c.ledger.Total().Tokens(); n >= max {
			c.over = &budgetHit{reason: "tokens", text: fmt.Sprintf("the token cap of %d is spent (%d so far)", max, n)}
			return
		}
	}
	max := c.limits.MaxCostUSD
	if max <= 0 {
		return
	}
	cost, known := c.runningCost()
	switch {
	case !known:
		model := c.res.Model
		if model == "" {
			model = c.model
		}
		c.over = &budgetHit{reason: "cost", text: fmt.Sprintf("the cost cap of $%.4f cannot be enforced: the CLI reports no cost and model %q has no price", max, model)}
	case cost >= max:
		c.over = &budgetHit{reason: "cost", text: fmt.Sprintf("the cost cap of $%.4f is spent ($%.4f so far)", max, cost)}
	}
}

// addText keeps a piece of the answer while the text bound allows.
func (c *collector) addText(t string) {
	if c.haveResult {
		return // the final text is already known; pieces no longer matter
	}
	room := c.limits.TextBytes - c.textBytes - len(c.texts) // the joining newlines count too
	if len(t) > room {
		c.textCut = true
		if room <= 0 {
			return
		}
		t = adapters.Preview(t, room)
	}
	c.texts = append(c.texts, t)
	c.textBytes += len(t)
}

// finishedOK reports whether the CLI's terminal event said the turn succeeded.
func (c *collector) finishedOK() bool { return c.finished != nil && c.finished.OK }

// finalize fills the result's text, usage and tails.
func (c *collector) finalize() {
	if c.haveResult {
		c.res.Text = c.resultText
	} else {
		c.res.Text = strings.Join(c.texts, "\n")
	}
	if c.textCut {
		c.res.TextTruncated = true
		c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("answer text cut at %d bytes", c.limits.TextBytes))
	}
	if c.unkept > 0 {
		c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("%d events not kept in the result (bound: %d)", c.unkept, c.limits.KeptEvents))
	}
	if c.ledger.Empty() {
		// No report at all: nothing is known, so nothing is complete.
		c.res.Usage = usage.Usage{}
	} else {
		c.res.Usage = c.ledger.Total()
	}
	if !c.res.Usage.Complete && c.res.Err == nil && !c.ledger.Empty() {
		c.res.Warnings = append(c.res.Warnings, "token usage is incomplete; reported counters are a lower bound")
	}
	if cum, ok := c.ledger.Cumulative(); ok {
		c.res.cumulative = &cum
	}
	c.res.StdoutTail = c.stdoutTail.String()
	c.res.StderrTail = c.stderrTail.String()
}

// tail keeps the last n bytes written to it.
type tail struct {
	buf []byte
	n   int
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) writeLine(p []byte) {
	t.write(p)
	t.write([]byte{'\n'})
}

func (t *tail) write(p []byte) {
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		return
	}
	if over := len(t.buf) + len(p) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

func (t *tail) String() string { return string(t.buf) }
