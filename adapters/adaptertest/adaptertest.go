// Package adaptertest is the conformance suite every adapter passes.
//
// Golden fixtures live one folder per case under an adapter's testdata
// directory:
//
//	testdata/<case>/stdout.jsonl   what the CLI printed on stdout (captured from the real CLI)
//	testdata/<case>/stderr.txt     what it printed on stderr (optional)
//	testdata/<case>/meta.json      {"exit_code": N, "time": RFC 3339, "source": "...", "cli_version": "..."}
//	testdata/<case>/expected.json  the normalized events and the outcome
//
// [Run] replays each case (package adapters/golden) through [harness.Replay]
// — the same decoder, recognizers and classification a live turn uses — and
// compares the result with expected.json. `go test -run TestGolden ./adapters/<cli>/ -update`
// rewrites the expectations from the current code; review the diff.
// Adding a case is adding a folder.
package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/golden"
	"github.com/outpost-dev/outpost/harness"
)

var update = flag.Bool("update", false, "rewrite adapter golden expectations")

// Load reads every case folder under dir.
func Load(dir string) ([]golden.Case, error) { return golden.Load(os.DirFS(dir), ".") }

// Run replays every fixture under dir through a and compares it with its
// expected.json, and checks the decoder invariants on every line.
func Run(t *testing.T, a adapters.Adapter, dir string) {
	t.Helper()
	cases, err := Load(dir)
	require.NoError(t, err)
	require.NotEmpty(t, cases, "no fixtures under %s", dir)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			res := c.Replay(context.Background(), a)
			compareExpected(t, filepath.Join(dir, c.Dir, "expected.json"), res)
			CheckStream(t, a.NewDecoder(), c.Stdout)
		})
	}
}

// compareExpected compares a replay's events and outcome with the
// expected.json at path (rewriting it first with -update). The events'
// times are left out: the replay instant is in meta.json.
func compareExpected(t *testing.T, path string, res *harness.Result) {
	t.Helper()
	got := golden.Expected{Events: res.Events, Outcome: res.Outcome()}
	for i := range got.Events {
		got.Events[i].Time = time.Time{}
	}
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
}

// CheckStream feeds a whole stream to dec line by line and checks the
// decoder invariants: no panic, at least one event per non-empty line, only
// known kinds, no harness-owned fields set.
func CheckStream(t testing.TB, dec adapters.Decoder, stdout []byte) {
	t.Helper()
	for _, l := range bytes.Split(stdout, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		evs := dec.Decode(l)
		assert.NotEmpty(t, evs, "line decoded to nothing: %.200s", l)
		for _, ev := range evs {
			CheckEvent(t, ev)
		}
	}
}

// CheckEvent asserts the invariants of one decoded event.
func CheckEvent(t testing.TB, ev adapters.Event) {
	t.Helper()
	assert.True(t, slices.Contains(adapters.Kinds, ev.Kind), "unknown kind %q", ev.Kind)
	assert.Zero(t, ev.Seq, "adapters must not set Seq")
	assert.True(t, ev.Time.IsZero(), "adapters must not set Time")
	assert.NotEqual(t, adapters.KindInput, ev.Kind, "input events come from the harness, not adapters")
	if ev.ToolResult != nil {
		assert.LessOrEqual(t, len(ev.ToolResult.Preview), adapters.PreviewLimit)
	}
	if ev.Kind == adapters.KindRaw {
		assert.NotEmpty(t, ev.Raw, "raw event must carry its line")
	}
}

// CheckLongRaw decodes line, a line dec does not understand that is longer
// than [adapters.RawLimit], and asserts that its raw event is bounded the way
// [adapters.RawEvent] bounds one: {"truncated_bytes":N,"preview":…}, the
// preview at most [adapters.RawPreview] bytes.
func CheckLongRaw(t testing.TB, dec adapters.Decoder, line []byte) {
	t.Helper()
	require.Greater(t, len(line), adapters.RawLimit, "the line must be over the bound")
	evs := dec.Decode(line)
	require.Len(t, evs, 1, "one raw event")
	ev := evs[0]
	CheckEvent(t, ev)
	require.Equal(t, adapters.KindRaw, ev.Kind)
	require.Less(t, len(ev.Raw), 2*adapters.RawPreview, "the raw event carries the whole %d-byte line", len(line))
	var got struct {
		Bytes   int    `json:"truncated_bytes"`
		Preview string `json:"preview"`
	}
	require.NoError(t, json.Unmarshal(ev.Raw, &got))
	assert.Equal(t, len(line), got.Bytes)
	assert.LessOrEqual(t, len(got.Preview), adapters.RawPreview)
	assert.True(t, strings.HasPrefix(string(line), got.Preview), "the preview is the line's start")
}

// FuzzDecodeStream fuzzes a decoder with whole streams, so the state one
// line leaves meets every later line ([CheckStream]); a fresh decoder from
// newDecoder for each input. It is seeded with every stdout.jsonl below dir,
// and with more.
func FuzzDecodeStream(f *testing.F, newDecoder func() adapters.Decoder, dir string, more ...[]byte) {
	f.Helper()
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if filepath.Base(p) == "stdout.jsonl" {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	for _, b := range more {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { CheckStream(t, newDecoder(), b) })
}

// FuzzDecode fuzzes an adapter's decoder: it must never panic and must turn
// every non-empty line into at least one valid event. Seed it with fixture lines.
func FuzzDecode(f *testing.F, newAdapter func() adapters.Adapter, fixtures string) {
	f.Helper()
	if cases, err := Load(fixtures); err == nil {
		for _, c := range cases {
			for _, l := range strings.Split(string(c.Stdout), "\n") {
				f.Add([]byte(l))
			}
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":null}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, line []byte) {
		a := newAdapter()
		dec := a.NewDecoder()
		evs := dec.Decode(line)
		if len(bytes.TrimSpace(line)) > 0 && len(evs) == 0 {
			t.Fatalf("line decoded to nothing: %q", line)
		}
		for _, ev := range evs {
			CheckEvent(t, ev)
		}
	})
}
