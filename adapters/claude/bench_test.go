package claude_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/outpost-dev/outpost/adapters/claude"
)

// benchLines is a realistic mixed stream: every captured fixture line
// (init lines with their long tool and command lists, assistant text and
// tool calls, tool results, stream deltas, retries, rate-limit events,
// synthetic failures and results), in capture order.
func benchLines(b *testing.B) [][]byte {
	b.Helper()
	var lines [][]byte
	for _, name := range []string{"ok", "ok_partial", "tool", "resume", "fork", "quota", "quota_warning",
		"rate_limit", "overloaded", "unauthorized", "connection_refused"} {
		for _, l := range bytes.Split([]byte(mustRead(b, "testdata/"+name+"/stdout.jsonl")), []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

func size(lines [][]byte) int64 {
	var n int64
	for _, l := range lines {
		n += int64(len(l))
	}
	return n
}

// BenchmarkDecode decodes the stream with a fresh decoder per pass.
func BenchmarkDecode(b *testing.B) {
	lines := benchLines(b)
	b.SetBytes(size(lines))
	b.ReportAllocs()
	for b.Loop() {
		d := claude.NewDecoder()
		for _, l := range lines {
			if len(d.Decode(l)) == 0 {
				b.Fatal("no event")
			}
		}
	}
}

// BenchmarkDecodeMapAny is the baseline: encoding/json into map[string]any,
// with no normalization at all.
func BenchmarkDecodeMapAny(b *testing.B) {
	lines := benchLines(b)
	b.SetBytes(size(lines))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
}
