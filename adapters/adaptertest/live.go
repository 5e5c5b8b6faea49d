package adaptertest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
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
	Prompt   string        `json:"prompt"`
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
		t.Run(c.Name, func(t *testing.T) {
			script, err := LoadLiveScript(c.Dir)
			require.NoError(t, err)
			a := adapter(script)
			li, ok := a.(adapters.LiveInput)
			require.True(t, ok, "%s has no live input", a.Name())
			cmd, sess, err := li.LiveRequest(adapters.Input{Prompt: script.Prompt})
			require.NoError(t, err)
			assert.True(t, cmd.KeepStdinOpen)
			dec := &scripted{t: t, sess: sess, script: script, stdin: append([]byte(nil), cmd.Stdin...)}
			res := c.Replay(liveAdapter{Adapter: a, dec: dec})
			assert.Len(t, dec.script.Messages, dec.sent, "every scripted message was delivered")
			assert.True(t, sess.Done(), "the session finished")
			assert.False(t, sess.Ready(), "a finished session takes no input")
			if want, err := os.ReadFile(filepath.Join(c.Dir, "stdin.jsonl")); assert.NoError(t, err) {
				assert.Equal(t, string(want), string(dec.stdin), "the session wrote what the capture wrote")
			}

			got := Expected{Events: res.Events, Outcome: res.Outcome()}
			for i := range got.Events {
				got.Events[i].Time = time.Time{}
			}
			path := filepath.Join(c.Dir, "expected.json")
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing expected.json; run with -update and review it")
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(gotJSON))
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
