package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/driver"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

func jsonlAdapter(t testing.TB) *driver.Adapter {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "jsonl.json"))
	require.NoError(t, err)
	s, err := driver.Parse(data, "jsonl.json")
	require.NoError(t, err)
	return driver.New(s)
}

var at = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func replay(a adapters.Adapter, stdout, stderr string, code int) *harness.Result {
	return harness.Replay(context.Background(), a, harness.Recording{Stdout: strings.NewReader(stdout), Stderr: strings.NewReader(stderr),
		Exit: sandbox.ExitStatus{Code: code}, At: at}, nil, true)
}

const okRun = `{"type":"init","session_id":"s-1"}
{"type":"message","content":"Looking."}
{"type":"tool","name":"shell","args":{"cmd":"ls"},"call_id":"c1"}
not json at all
{"type":"message","content":"Done."}
{"type":"heartbeat"}
{"type":"done","status":"success","answer":"all good","usage":{"input":120,"output":30,"cost":0.002}}
`

func TestJSONLDecode(t *testing.T) {
	a := jsonlAdapter(t)
	res := replay(a, okRun, "", 0)
	require.NoError(t, res.Err)
	assert.Equal(t, "s-1", res.Conversation)
	assert.Equal(t, "all good", res.Text, "the final text is the answer")
	assert.Equal(t, int64(120), res.Usage.Input)
	assert.Equal(t, int64(30), res.Usage.Output)
	assert.InDelta(t, 0.002, res.Usage.CostUSD, 1e-9)
	assert.Equal(t, 2, res.Counts[adapters.KindText])
	assert.Equal(t, 1, res.Counts[adapters.KindTool])
	assert.Equal(t, 2, res.Counts[adapters.KindRaw], "unmatched and invalid lines are kept raw")
	for _, ev := range res.Events {
		if ev.Kind == adapters.KindTool {
			assert.Equal(t, "shell", ev.Tool.Name)
			assert.Equal(t, "c1", ev.Tool.CallID)
			assert.JSONEq(t, `{"cmd":"ls"}`, string(ev.Tool.Input))
		}
	}
}

func TestJSONLClassification(t *testing.T) {
	a := jsonlAdapter(t)
	for name, tc := range map[string]struct {
		stdout, stderr string
		code           int
		class          outposterr.Class
		check          func(t *testing.T, e *outposterr.Error)
	}{
		"final not ok": {stdout: `{"type":"init","session_id":"s-1"}` + "\n" + `{"type":"done","status":"error"}`, class: outposterr.Process},
		"no final":     {stdout: `{"type":"message","content":"hi"}`, class: outposterr.Process},
		"quota text with reset": {stdout: `{"type":"error","message":"Rate limited, resets in 2 hours"}`, code: 1, class: outposterr.Quota,
			check: func(t *testing.T, e *outposterr.Error) { assert.Equal(t, at.Add(2*time.Hour), e.Details.ResetAt) }},
		"quota exit code": {stderr: "stopping", code: 3, class: outposterr.Quota},
		"quota exit code, reset from stderr": {stderr: "rate limited, resets 2026-12-03T00:00:00Z", code: 3, class: outposterr.Quota,
			check: func(t *testing.T, e *outposterr.Error) {
				assert.Equal(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), e.Details.ResetAt.UTC())
			}},
		"unavailable text": {stdout: `{"type":"error","message":"model overloaded","code":529}`, code: 1, class: outposterr.Process,
			check: func(t *testing.T, e *outposterr.Error) { assert.Equal(t, "overloaded", e.Details.Unavailable) }},
		"unavailable exit": {code: 4, class: outposterr.Process,
			check: func(t *testing.T, e *outposterr.Error) {
				assert.Equal(t, "exit 4", e.Details.Unavailable)
				assert.True(t, e.Details.Retryable)
			}},
		"auth text": {stderr: "Error: Invalid API key", code: 1, class: outposterr.Process,
			check: func(t *testing.T, e *outposterr.Error) { assert.Equal(t, "Invalid API key", e.Details.Auth) }},
		"auth exit":    {code: 5, class: outposterr.Process, check: func(t *testing.T, e *outposterr.Error) { assert.Equal(t, "exit 5", e.Details.Auth) }},
		"session exit": {code: 6, class: outposterr.Session},
		"other exit":   {stderr: "boom", code: 9, class: outposterr.Process},
	} {
		t.Run(name, func(t *testing.T) {
			res := replay(a, tc.stdout, tc.stderr, tc.code)
			require.Error(t, res.Err)
			e, ok := outposterr.As(res.Err)
			require.True(t, ok)
			assert.Equal(t, tc.class, e.Class, "%v", res.Err)
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestTextMode(t *testing.T) {
	s, err := driver.Parse([]byte(`{"id":"echo","binary":"sh","stdin":"${input.prompt}","output":{"mode":"text"},
		"failures":{"exit_codes":{"7":"quota"},"quota":["try again (?P<reset>in .+)"]}}`), "echo.json")
	require.NoError(t, err)
	a := driver.New(s)
	res := replay(a, "line one\n\nline three\n", "", 0)
	require.NoError(t, res.Err)
	assert.Equal(t, "line one\n\nline three", res.Text, "stdout is the answer, blank lines kept")

	res = replay(a, "partial\n", "out of credit, try again in 3 hours", 7)
	e, ok := outposterr.As(res.Err)
	require.True(t, ok)
	assert.Equal(t, outposterr.Quota, e.Class)
	assert.Equal(t, at.Add(3*time.Hour), e.Details.ResetAt)
	assert.Equal(t, "partial", res.Text, "partial output is kept")

	res = replay(a, "", "crashed", 2)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(res.Err))
	assert.Contains(t, res.Err.Error(), "crashed")
}

func TestGoldenInvariants(t *testing.T) {
	a := jsonlAdapter(t)
	dec := a.NewDecoder()
	for _, l := range strings.Split(okRun, "\n") {
		for _, ev := range dec.Decode([]byte(l)) {
			adaptertest.CheckEvent(t, ev)
		}
	}
}

func FuzzJSONLDecode(f *testing.F) {
	a := jsonlAdapter(f)
	for _, l := range strings.Split(okRun, "\n") {
		f.Add([]byte(l))
	}
	f.Add([]byte(`{"type":"init","session_id":{"x":1}}`))
	f.Add([]byte(`{"type":"done","usage":"x"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		evs := a.NewDecoder().Decode(line)
		if len(evs) == 0 {
			t.Fatalf("line %q dropped", line)
		}
		for _, ev := range evs {
			adaptertest.CheckEvent(t, ev)
		}
	})
}
