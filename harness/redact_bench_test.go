package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOutputRedactor passes Claude Code's captured streams (the
// adapter's fixtures, every line) through the redactor of a lease holding
// four secrets (an API key, a token, a forwarded secret and a login
// file's token), none of which occurs: the cost every line pays.
func BenchmarkOutputRedactor(b *testing.B) {
	var lines [][]byte
	paths, err := filepath.Glob("../adapters/claude/testdata/*/stdout.jsonl")
	if err != nil || len(paths) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	var n int64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
				n += int64(len(l))
			}
		}
	}
	r := newOutputRedactor(map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-api03-bench-0123456789abcdef", "GH_TOKEN": "ghp_bench0123456789abcdef",
		"EVAL_SECRET": "eval-secret-bench-42", "PATH": "/usr/bin:/bin",
	}, "sk-ant-ort01-bench-login-token")
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			if _, found := r.line(l); found {
				b.Fatal("a line changed")
			}
		}
	}
}
