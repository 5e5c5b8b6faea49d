package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

var replayAt = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func replay(t *testing.T, stdout, stderr string, code int) *Result {
	t.Helper()
	return Replay(context.Background(), fakecli.New("fake"), Recording{
		Stdout: strings.NewReader(stdout), Stderr: strings.NewReader(stderr),
		Exit: sandbox.ExitStatus{Code: code}, At: replayAt,
	}, nil, true)
}

func TestReplayClassification(t *testing.T) {
	reset := "2026-12-02T15:00:00Z"
	tests := []struct {
		name        string
		stdout      string
		stderr      string
		code        int
		class       outposterr.Class
		unavailable string
		auth        string
		resetAt     string
		text        string
	}{
		{name: "ok", stdout: `{"type":"conversation","id":"c1"}
{"type":"text","text":"hi"}
{"type":"result","text":"done"}
{"type":"finished","ok":true}`, text: "done"},
		{name: "text without result", stdout: `{"type":"text","text":"a"}
{"type":"text","text":"b"}
{"type":"finished","ok":true}`, text: "a\nb"},
		{name: "failure with exit 0 is a failure", stdout: `{"type":"failure","text":"boom"}
{"type":"finished","ok":true}`, class: outposterr.Process},
		{name: "finished not ok with exit 0", stdout: `{"type":"finished","ok":false}`, class: outposterr.Process},
		{name: "exit 0 without finished", stdout: `{"type":"text","text":"a"}`, class: outposterr.Process},
		{name: "nonzero exit after success event", stdout: `{"type":"finished","ok":true}`, code: 1, class: outposterr.Process},
		{name: "quota from failure text", stdout: `{"type":"failure","text":"quota hit reset=` + reset + `"}
{"type":"finished","ok":false}`, code: 1, class: outposterr.Quota, resetAt: reset},
		{name: "quota relative reset", stdout: `{"type":"failure","text":"quota hit reset=+2h"}`, code: 1,
			class: outposterr.Quota, resetAt: "2026-12-02T12:00:00Z"},
		{name: "structured reset beats text", stdout: `{"type":"quota","status":"rejected","reset":"2026-12-03T00:00:00Z"}
{"type":"failure","text":"quota hit reset=` + reset + `"}`, code: 1, class: outposterr.Quota, resetAt: "2026-12-03T00:00:00Z"},
		{name: "blocking quota event alone", stdout: `{"type":"quota","status":"rejected","reset":"` + reset + `"}
{"type":"failure","text":"request refused"}`, code: 1, class: outposterr.Quota, resetAt: reset},
		{name: "informational quota in failed turn is not quota", stdout: `{"type":"quota","status":"allowed","reset":"` + reset + `"}
{"type":"failure","text":"something else"}`, code: 1, class: outposterr.Process},
		{name: "quota event in successful turn ignored", stdout: `{"type":"quota","status":"rejected"}
{"type":"finished","ok":true}`},
		{name: "quota from stderr of failed turn", stderr: "error: quota exhausted", code: 1, class: outposterr.Quota},
		{name: "stderr quota ignored on success", stdout: `{"type":"finished","ok":true}`, stderr: "quota warning"},
		{name: "assistant text never scanned", stdout: `{"type":"text","text":"your quota is overloaded and unauthorized"}
{"type":"failure","text":"plain failure"}`, code: 1, class: outposterr.Process},
		{name: "overloaded is process+unavailable", stdout: `{"type":"failure","text":"API overloaded"}`, code: 1,
			class: outposterr.Process, unavailable: "overloaded"},
		{name: "5xx status is unavailable", stdout: `{"type":"failure","text":"server error","status":503}`, code: 1,
			class: outposterr.Process, unavailable: "http 503"},
		{name: "auth", stdout: `{"type":"failure","text":"401 unauthorized"}`, code: 1, class: outposterr.Process, auth: "unauthorized"},
		{name: "auth from status", stdout: `{"type":"failure","text":"denied","status":401}`, code: 1, class: outposterr.Process, auth: "http 401"},
		{name: "quota beats outage", stdout: `{"type":"failure","text":"overloaded"}
{"type":"failure","text":"quota"}`, code: 1, class: outposterr.Quota},
		{name: "invalid json is raw, not lost", stdout: "not json\n" + `{"type":"finished","ok":true}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := replay(t, tc.stdout, tc.stderr, tc.code)
			o := r.Outcome()
			if tc.class == "" {
				require.NoError(t, r.Err)
				assert.True(t, o.OK)
			} else {
				require.Error(t, r.Err)
				assert.Equal(t, string(tc.class), o.Class, "error: %v", r.Err)
			}
			assert.Equal(t, tc.unavailable, o.Unavailable)
			assert.Equal(t, tc.auth, o.Auth)
			assert.Equal(t, tc.resetAt, o.ResetAt)
			if tc.text != "" {
				assert.Equal(t, tc.text, o.Text)
			}
			for i, ev := range r.Events {
				assert.Equal(t, int64(i+1), ev.Seq)
				assert.Equal(t, replayAt, ev.Time)
			}
		})
	}
}

func TestReplayKeepsRawLines(t *testing.T) {
	r := replay(t, "garbage\n{\"type\":\"mystery\"}\n{\"type\":\"finished\",\"ok\":true}\n", "", 0)
	require.NoError(t, r.Err)
	assert.Equal(t, 2, r.Counts[adapters.KindRaw])
	assert.JSONEq(t, `"garbage"`, string(r.Events[0].Raw))
}

func TestReplayUsage(t *testing.T) {
	r := replay(t, `{"type":"usage","id":"m1","input":10,"output":1}
{"type":"usage","id":"m1","input":10,"output":5}
{"type":"usage","id":"m2","input":3,"output":2}
{"type":"finished","ok":true}`, "", 0)
	require.NoError(t, r.Err)
	assert.Equal(t, int64(13), r.Usage.Input)
	assert.Equal(t, int64(7), r.Usage.Output)
	assert.False(t, r.Usage.Complete, "message sums without a turn total are a lower bound")

	r = replay(t, `{"type":"usage","id":"m1","input":10,"output":5}
{"type":"usage","scope":"turn","input":12,"output":6,"cost":0.5}
{"type":"finished","ok":true}`, "", 0)
	assert.Equal(t, int64(12), r.Usage.Input)
	assert.InDelta(t, 0.5, r.Usage.CostUSD, 1e-9)
	assert.True(t, r.Usage.Complete)
}

func TestOutcomeSchema(t *testing.T) {
	r := replay(t, `{"type":"conversation","id":"c9"}
{"type":"failure","text":"quota reset=2026-12-02T15:00:00Z"}`, "", 1)
	o := r.Outcome()
	assert.Equal(t, "outcome", o.Type)
	assert.False(t, o.OK)
	assert.Equal(t, "quota", o.Class)
	assert.Equal(t, "c9", o.Conversation)
	assert.Equal(t, "2026-12-02T15:00:00Z", o.ResetAt)
	assert.True(t, outposterr.IsQuota(r.Err))
}
