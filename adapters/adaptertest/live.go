package adaptertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
)

// Live-input fixtures live one folder per case under testdata/live/ (kept
// apart from the one-shot cases, which a plain decoder replays):
//
//	testdata/live/<case>/stdout.jsonl   what the CLI printed (captured from the real CLI)
//	testdata/live/<case>/stdin.jsonl    every byte written to its stdin, in order
//	testdata/live/<case>/live.json      the script ([LiveScript])
//	testdata/live/<case>/stderr.txt, meta.json, expected.json   as for one-shot cases
//
// [RunLive] rebuilds the session from the script, replays stdout through it
// as the harness would (messages delivered after the recorded lines), checks
// that the session writes exactly the recorded stdin, and compares events and
// outcome with expected.json.

// LiveScript is what a live-input case did: the prompt and the messages the
// capture sent into the running turn.
type LiveScript struct {
	Prompt string `json:"prompt"`
	// Workdir and Continue are the turn's input fields, for CLIs whose
	// opening messages carry them.
	Workdir  string        `json:"workdir,omitempty"`
	Continue string        `json:"continue,omitempty"`
	Messages []LiveMessage `json:"messages"`
	// IDs are the message ids the session drew, in order, for CLIs whose
	// input lines carry ids; the adapter under test must reuse them.
	IDs []string `json:"ids,omitempty"`
}

// LiveMessage is one message sent into a live turn.
type LiveMessage struct {
	// After is how many stdout lines had been decoded when it was sent.
	After int    `json:"after"`
	Text  string `json:"text"`
}

// LoadLiveScript reads a case's live.json.
func LoadLiveScript(dir string) (LiveScript, error) {
	var s LiveScript
	b, err := os.ReadFile(filepath.Join(dir, "live.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// RunLive replays every live-input case under dir (testdata/live). adapter
// returns the adapter to test, set up to reproduce the script (its ids).
func RunLive(t *testing.T, dir string, adapter func(LiveScript) adapters.Adapter) {
	t.Helper()
	cases, err := Load(dir)
	require.NoError(t, err)
	require.NotEmpty(t, cases, "no live fixtures under %s", dir)
	for _, c := range cases {
		cdir := filepath.Join(dir, c.Name)
		t.Run(c.Name, func(t *testing.T) {
			script, err := LoadLiveScript(cdir)
			require.NoError(t, err)
			a := adapter(script)
			li, ok := a.(adapters.LiveInput)
			require.True(t, ok, "%s has no live input", a.Name())
			cmd, sess, err := li.LiveRequest(adapters.Input{Prompt: script.Prompt, Workdir: script.Workdir, Continue: script.Continue})
			require.NoError(t, err)
			assert.True(t, cmd.KeepStdinOpen)
			dec := &scripted{t: t, sess: sess, script: script, stdin: append([]byte(nil), cmd.Stdin...)}
			res := c.Replay(context.Background(), liveAdapter{Adapter: a, dec: dec})
			assert.Len(t, dec.script.Messages, dec.sent, "every scripted message was delivered")
			assert.True(t, sess.Done(), "the session finished")
			assert.False(t, sess.Ready(), "a finished session takes no input")
			if want, err := os.ReadFile(filepath.Join(cdir, "stdin.jsonl")); assert.NoError(t, err) {
				assert.Equal(t, string(want), string(dec.stdin), "the session wrote what the capture wrote")
			}
			compareExpected(t, filepath.Join(cdir, "expected.json"), res)
		})
	}
}

// liveAdapter replays through a scripted live session instead of the
// adapter's one-shot decoder; the recognizers classification asks for by
// type assertion are passed through.
type liveAdapter struct {
	adapters.Adapter
	dec adapters.Decoder
}

func (l liveAdapter) NewDecoder() adapters.Decoder { return l.dec }

func (l liveAdapter) SessionMissing(text string) bool {
	sr, ok := l.Adapter.(adapters.SessionRecognizer)
	return ok && sr.SessionMissing(text)
}

func (l liveAdapter) RecognizeFailure(f adapters.FailureDetail, text string) adapters.Verdict {
	if fr, ok := l.Adapter.(adapters.FailureRecognizer); ok {
		return fr.RecognizeFailure(f, text)
	}
	return adapters.Verdict{}
}

func (l liveAdapter) ExitMeaning(code int) string {
	if em, ok := l.Adapter.(adapters.ExitMapper); ok {
		return em.ExitMeaning(code)
	}
	return ""
}

// scripted drives a live session the way the harness does: each stdout
// line to Decode, then Pending, then the messages due after that line (an
// input event each), then stdin is closed once Done.
type scripted struct {
	t      *testing.T
	sess   adapters.LiveSession
	script LiveScript
	lines  int
	sent   int
	closed bool
	stdin  []byte
}

func (d *scripted) Decode(line []byte) []adapters.Event {
	evs := d.sess.Decode(line)
	assert.NotEmpty(d.t, evs, "line decoded to nothing: %.200s", line)
	for _, ev := range evs {
		CheckEvent(d.t, ev)
	}
	d.lines++
	if d.closed {
		return evs
	}
	d.stdin = append(d.stdin, d.sess.Pending()...)
	for d.sent < len(d.script.Messages) && d.script.Messages[d.sent].After == d.lines {
		m := d.script.Messages[d.sent]
		d.sent++
		if !assert.True(d.t, d.sess.Ready(), "message %d due after line %d, but the session is not ready", d.sent, d.lines) {
			continue
		}
		b, err := d.sess.EncodeInput(m.Text)
		if assert.NoError(d.t, err) {
			d.stdin = append(d.stdin, b...)
			evs = append(evs, adapters.Event{Kind: adapters.KindInput, Text: m.Text})
		}
	}
	if d.sess.Done() {
		d.closed = true
	}
	return evs
}

// LiveSend is a message a live run sends once an event matches When (sends
// are tried in order: one only after the previous fired).
type LiveSend struct {
	When func(adapters.Event) bool
	Text string
}

// LiveRun is what a live-input turn of a real CLI did.
type LiveRun struct {
	Events   []adapters.Event
	Stdout   []byte // every line after stable
	Stdin    []byte // every byte written
	Stderr   []byte
	Messages []LiveMessage
	Code     int
	At       time.Time
}

// Count returns how many events of kind k the run had.
func (r LiveRun) Count(k adapters.Kind) int {
	n := 0
	for _, ev := range r.Events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// Last returns the text of the run's last event of kind k.
func (r LiveRun) Last(k adapters.Kind) string {
	text := ""
	for _, ev := range r.Events {
		if ev.Kind == k {
			text = ev.Text
		}
	}
	return text
}

// DriveLive runs cmd on this machine (its argv, env plus PATH, dir) and
// speaks sess on it as the harness does: each stdout line through stable
// (nil: unchanged) to Decode, then Pending, then the messages due, once
// Ready; stdin is closed when Done. It fails the test if the CLI outlives
// limit or the session never finishes.
func DriveLive(t *testing.T, cmd sandbox.Command, sess adapters.LiveSession, sends []LiveSend,
	stable func([]byte) []byte, limit time.Duration) LiveRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	p := exec.CommandContext(ctx, cmd.Args[0], cmd.Args[1:]...)
	p.Dir = cmd.Dir
	p.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range cmd.Env {
		p.Env = append(p.Env, k+"="+v)
	}
	stdin, err := p.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	p.Stderr = &stderr
	require.NoError(t, p.Start())
	var run LiveRun
	write := func(b []byte) {
		if len(b) == 0 {
			return
		}
		run.Stdin = append(run.Stdin, b...)
		_, err := stdin.Write(b)
		require.NoError(t, err)
	}
	write(cmd.Stdin)

	var lines bytes.Buffer
	var waiting []string
	fired, count, closed := 0, 0, false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if stable != nil {
			line = stable(line)
		}
		lines.Write(line)
		lines.WriteByte('\n')
		count++
		evs := sess.Decode(line)
		assert.NotEmpty(t, evs, "line decoded to nothing: %.200s", line)
		for _, ev := range evs {
			CheckEvent(t, ev)
			run.Events = append(run.Events, ev)
			if fired < len(sends) && sends[fired].When(ev) {
				waiting = append(waiting, sends[fired].Text)
				fired++
			}
		}
		if closed {
			continue
		}
		write(sess.Pending())
		for len(waiting) > 0 && sess.Ready() {
			b, err := sess.EncodeInput(waiting[0])
			require.NoError(t, err)
			write(b)
			run.Messages = append(run.Messages, LiveMessage{After: count, Text: waiting[0]})
			run.Events = append(run.Events, adapters.Event{Kind: adapters.KindInput, Text: waiting[0]})
			waiting = waiting[1:]
		}
		if sess.Done() {
			require.NoError(t, stdin.Close())
			closed = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = p.Wait()
	run.At = time.Now()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		run.Code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	run.Stdout, run.Stderr = lines.Bytes(), stderr.Bytes()
	require.NoError(t, ctx.Err(), "the CLI did not finish:\n%s\n%s", run.Stdout, run.Stderr)
	require.True(t, closed, "the session never finished:\n%s", run.Stdout)
	assert.Empty(t, waiting, "every message was delivered")
	assert.Len(t, run.Messages, len(sends), "every trigger fired:\n%s", run.Stdout)
	return run
}

// WriteLiveCase records run as the live case dir: stdout.jsonl, stdin.jsonl,
// stderr.txt, live.json (script with the run's messages) and meta.json.
func WriteLiveCase(t *testing.T, dir string, script LiveScript, run LiveRun, source, version string) {
	t.Helper()
	script.Messages = run.Messages
	require.NoError(t, os.MkdirAll(dir, 0o755))
	files := map[string][]byte{"stdout.jsonl": run.Stdout, "stdin.jsonl": run.Stdin, "stderr.txt": run.Stderr}
	b, err := json.MarshalIndent(script, "", "  ")
	require.NoError(t, err)
	files["live.json"] = append(b, '\n')
	b, err = json.MarshalIndent(map[string]any{"exit_code": run.Code, "time": run.At.UTC().Format(time.RFC3339),
		"source": source, "cli_version": version}, "", "  ")
	require.NoError(t, err)
	files["meta.json"] = append(b, '\n')
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
}

// FuzzLiveDecode fuzzes a live session's Decode: it must never panic, must
// turn every non-empty line into at least one valid event, and Ready and
// Done must never both hold. newSession returns a fresh session; seeds are
// the stdout lines of every live case under fixtures.
func FuzzLiveDecode(f *testing.F, newSession func() adapters.LiveSession, fixtures string) {
	f.Helper()
	if cases, err := Load(fixtures); err == nil {
		for _, c := range cases {
			for _, l := range bytes.Split(c.Stdout, []byte("\n")) {
				f.Add(l)
			}
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":null,"result":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		s := newSession()
		for range 2 { // a repeated line must not break the state either
			evs := s.Decode(line)
			if len(bytes.TrimSpace(line)) > 0 && len(evs) == 0 {
				t.Fatalf("line decoded to nothing: %q", line)
			}
			for _, ev := range evs {
				CheckEvent(t, ev)
			}
			if s.Ready() && s.Done() {
				t.Fatalf("ready and done at once after %q", line)
			}
			_ = s.Pending()
		}
	})
}
