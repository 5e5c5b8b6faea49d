package driver_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchStream is okRun repeated: a mixed JSONL stream of conversation, text,
// tool, unmatched, invalid and final lines.
func benchStream() [][]byte {
	var lines [][]byte
	for range 50 {
		for _, l := range strings.Split(strings.TrimSpace(okRun), "\n") {
			lines = append(lines, []byte(l))
		}
	}
	return lines
}

// BenchmarkJSONLDecode decodes the stream through the spec's six rules.
func BenchmarkJSONLDecode(b *testing.B) {
	a := jsonlAdapter(b)
	lines := benchStream()
	var n int64
	for _, l := range lines {
		n += int64(len(l))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		dec := a.NewDecoder()
		for _, l := range lines {
			dec.Decode(l)
		}
	}
}

// BenchmarkJSONLUnmarshalOnly is the floor: json.Unmarshal of each line into
// map[string]any, which the driver decoder does before applying its rules.
func BenchmarkJSONLUnmarshalOnly(b *testing.B) {
	lines := benchStream()
	var n int64
	for _, l := range lines {
		n += int64(len(l))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			var m map[string]any
			_ = json.Unmarshal(l, &m)
		}
	}
}
