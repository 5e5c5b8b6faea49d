package codex_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/outpost-dev/outpost/adapters/codex"
)

// benchLines is a realistic mixed stream: every captured fixture line
// (thread and turn lines, reasoning, agent messages, command executions,
// usage, retry chatter, failures), in capture order.
func benchLines(b *testing.B) [][]byte {
	b.Helper()
	var lines [][]byte
	for _, name := range []string{"ok", "ok_fallback_model", "tool", "tool_exec_command", "resume", "fork",
		"rate_limit", "quota", "unavailable", "unauthorized", "connection_refused"} {
		data, err := os.ReadFile("testdata/" + name + "/stdout.jsonl")
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
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
		d := codex.NewDecoder()
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
