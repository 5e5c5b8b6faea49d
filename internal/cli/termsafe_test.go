package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

// hostileText holds what an agent could print to steer a terminal: an OSC
// title change, a screen clear, an 8-bit CSI, a right-to-left override and
// isolate, backspaces and a carriage return that rewrites the line.
var hostileText = []string{"\x1b]0;pwned\x07", "\x1b[2J", "\u009b31m", "\u202e", "\u2066", "ab\b\bXY", "rm -rf /\rls", "\x1bP+q\x1b\\", "\x7f"}

// rawControls are the sequences that must never reach a terminal raw.
var rawControls = []string{"\x1b", "\x07", "\u009b", "\u202e", "\u2066", "\b", "\r", "\x7f"}

func assertNoControls(t *testing.T, out string) {
	t.Helper()
	for _, c := range rawControls {
		assert.NotContains(t, out, c, "%q reached the terminal raw", c)
	}
}

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\ttabbed":     "plain text\n\ttabbed",
		"héllo ✔ 日本":               "héllo ✔ 日本",
		"\x1b]0;pwned\x07":         `\x1b]0;pwned\x07`,
		"\x1b[2J":                  `\x1b[2J`,
		"\u009b31m":                `\u009b31m`,
		"\x9b31m":                  "\uFFFD31m", // a lone byte is not UTF-8
		"abc\u202edef\u2069":       `abc\u202edef\u2069`,
		"a\bb\x7f":                 `a\x08b\x7f`,
		"line\r\nnext\rover":       `line` + "\n" + `next\x0dover`,
		"\u2028 and \ufffd stay":   "\u2028 and \ufffd stay",
		"cut rune \xe6\x97":        "cut rune \uFFFD\uFFFD",
		"nul\x00":                  `nul\x00`,
		"\u0085 next line control": `\u0085 next line control`,
	} {
		assert.Equal(t, want, termSafe(in), "%q", in)
	}
	s := "nothing to do"
	assert.Equal(t, s, termSafe(s))
}

// TestRendererNeutralizesControls: every event kind the human renderer
// prints, and the outcome, carry no control sequence of the agent's to the
// terminal; --json reproduces the text exactly.
func TestRendererNeutralizesControls(t *testing.T) {
	text := strings.Join(hostileText, " ")
	events := []adapters.Event{
		{Kind: adapters.KindConversation, Conversation: "c\x1b[1m", Model: "m\x1b[2J", Version: "v\u202e"},
		{Kind: adapters.KindText, Text: text},
		{Kind: adapters.KindTextDelta, Text: "\x1b]0;"},
		{Kind: adapters.KindTextDelta, Text: "pwned\x07"},
		{Kind: adapters.KindReasoning, Text: text},
		{Kind: adapters.KindTool, Tool: &adapters.ToolCall{Name: "Bash\x1b[2J", Input: json.RawMessage(`{"cmd":"\u001b[2J\u009b31m"}`)}},
		{Kind: adapters.KindToolResult, ToolResult: &adapters.ToolResult{Preview: text}},
		{Kind: adapters.KindFileChange, FileChange: &adapters.FileChange{Change: "update", Path: "a\x1b[2Jb\u202e.go"}},
		{Kind: adapters.KindRetry, Retry: &adapters.RetryNotice{Attempt: 1, MaxAttempts: 2, Reason: text}},
		{Kind: adapters.KindQuota, Quota: &adapters.QuotaSignal{Status: "rejected\x1b[2J"}, Text: text},
		{Kind: adapters.KindWarning, Text: text},
		{Kind: adapters.KindFailure, Text: text},
		{Kind: adapters.KindStderr, Text: text},
		{Kind: adapters.KindInput, Text: text}, // the --live echo
	}
	var human, js bytes.Buffer
	for _, buf := range []*bytes.Buffer{&human, &js} {
		r := newRenderer(buf, buf == &js)
		for _, ev := range events {
			r.event(ev)
		}
		r.close()
	}
	assertNoControls(t, human.String())
	assert.Contains(t, human.String(), `\x1b]0;pwned\x07`, "shown, not acted on")
	assert.Contains(t, human.String(), `\u202e`)
	assert.Contains(t, human.String(), "» ", "the live echo is printed")

	// --json: each event decodes back to exactly what the agent printed.
	lines := strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n")
	require.Len(t, lines, len(events))
	for i, l := range lines {
		var got adapters.Event
		require.NoError(t, json.Unmarshal([]byte(l), &got))
		assert.Equal(t, events[i].Text, got.Text)
		assert.Equal(t, events[i].Conversation, got.Conversation)
	}
}

// TestRunNeutralizesAgentText: an agent whose text events, final text and
// failure carry terminal control sequences prints none of them raw in
// human mode (stdout and the error on stderr); --json prints them exactly.
func TestRunNeutralizesAgentText(t *testing.T) {
	ws := t.TempDir()
	text := strings.Join(hostileText, " ")
	enc, err := json.Marshal(text)
	require.NoError(t, err)
	ok := "emit {\"type\":\"conversation\",\"id\":\"conv\\u001b[2J\"}\n" +
		"emit {\"type\":\"text\",\"text\":" + string(enc) + "}\n" +
		"emit {\"type\":\"tool\",\"text\":\"Bash\\u001b]0;x\\u0007\"}\n" +
		"emit {\"type\":\"result\",\"text\":" + string(enc) + "}\n" +
		"emit {\"type\":\"finished\",\"ok\":true}\n"
	// Only a final text (no text event): the renderer prints the result.
	final := "emit {\"type\":\"result\",\"text\":" + string(enc) + "}\nemit {\"type\":\"finished\",\"ok\":true}\n"
	failed := "emit {\"type\":\"failure\",\"text\":" + string(enc) + "}\nstderr " + "\x1b[2J\u202eboom" + "\nexit 1\n"
	for name, script := range map[string]string{"ok": ok, "final": final, "failed": failed} {
		t.Run(name, func(t *testing.T) {
			r := execute(t, script, nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--no-store", "--workspace", ws, "-")
			assertNoControls(t, r.stdout)
			assertNoControls(t, r.stderr)
			assert.Contains(t, r.stdout, `\x1b]0;pwned\x07`, "the text is shown, neutralized")

			r = execute(t, script, nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--no-store", "--workspace", ws, "--json", "-")
			var texts []string
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var v struct {
					Kind, Type, Text, Error string
				}
				require.NoError(t, json.Unmarshal([]byte(l), &v), l)
				texts = append(texts, v.Text, v.Error)
			}
			assert.Contains(t, texts, text, "--json carries the agent's text exactly")
		})
	}
}

// TestPrintErrorNeutralizes: an error quoting an agent's or a server's
// text prints it neutralized.
func TestPrintErrorNeutralizes(t *testing.T) {
	var b bytes.Buffer
	printError(&b, outposterr.Process, errors.New("process: CLI said \x1b]0;pwned\x07\u202e"))
	assert.Equal(t, `outpost: process: CLI said \x1b]0;pwned\x07\u202e`+"\n", b.String())
}

// TestOneLine: white space folds and a cut never splits a character.
func TestOneLine(t *testing.T) {
	assert.Equal(t, "a b c", oneLine("a\n b\t\tc ", 10))
	assert.Equal(t, "ab…", oneLine("abcdef", 2))
	assert.Equal(t, "a…", oneLine("aéé", 2), "é is two bytes: the cut moves back to its start")
	assert.True(t, utf8.ValidString(oneLine(strings.Repeat("日本", 50), 100)))
}
