package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInvocable(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin", "nm/.bin", "nm/pkg/bin", "native"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	// A launcher script: bin/codex → nm/.bin/codex → nm/pkg/bin/codex.js.
	write("nm/pkg/bin/codex.js")
	link("../pkg/bin/codex.js", "nm/.bin/codex")
	link("../nm/.bin/codex", "bin/codex")
	// A native binary: bin/claude → native/claude.
	write("native/claude")
	link("../native/claude", "bin/claude")
	for name, want := range map[string]string{"codex": "nm/.bin/codex", "claude": "native/claude"} {
		got := invocable(filepath.Join(dir, "bin", name), name)
		if got != filepath.Join(dir, want) {
			t.Errorf("invocable(%s) = %s, want %s", name, got, filepath.Join(dir, want))
		}
	}
	write("plain")
	if got := invocable(filepath.Join(dir, "plain"), "plain"); got != filepath.Join(dir, "plain") {
		t.Errorf("a plain file is itself: %s", got)
	}
}
