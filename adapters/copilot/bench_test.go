package copilot_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/outpost-dev/outpost/adapters/copilot"
)

// benchLines is every captured fixture line, in capture order.
func benchLines(b *testing.B) [][]byte {
	b.Helper()
	var lines [][]byte
	for _, name := range []string{"ok", "tool", "resume", "rate_limit", "quota", "unavailable", "unauthorized"} {
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

// BenchmarkDecode decodes the stream with a fresh decoder per pass.
func BenchmarkDecode(b *testing.B) {
	lines := benchLines(b)
	var n int64
	for _, l := range lines {
		n += int64(len(l))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		d := copilot.NewDecoder()
		for _, l := range lines {
			if len(d.Decode(l)) == 0 {
				b.Fatal("no event")
			}
		}
	}
}
