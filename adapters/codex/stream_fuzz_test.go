package codex_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/codex"
)

// seedStreams adds every stdout.jsonl under dir, whole, as a seed.
func seedStreams(f *testing.F, dir string) {
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if filepath.Base(p) == "stdout.jsonl" {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
}

// checkStream feeds every line of b to dec: no panic, every non-blank line
// yields an event, and every event marshals.
func checkStream(t *testing.T, dec adapters.Decoder, b []byte) {
	for _, l := range bytes.Split(b, []byte("\n")) {
		evs := dec.Decode(l)
		if len(bytes.TrimSpace(l)) > 0 && len(evs) == 0 {
			t.Fatalf("line decoded to nothing: %q", l)
		}
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event does not marshal: %v", err)
			}
		}
	}
}

// FuzzDecodeStream: whole streams through one decoder, so the state a line
// leaves meets every later line.
func FuzzDecodeStream(f *testing.F) {
	seedStreams(f, "testdata")
	f.Fuzz(func(t *testing.T, b []byte) { checkStream(t, codex.NewDecoder(), b) })
}

// FuzzAppServerDecodeStream: the same for an app-server session.
func FuzzAppServerDecodeStream(f *testing.F) {
	for _, n := range []string{"appserver_live.jsonl", "appserver_rate_limit.jsonl", "appserver_unauthorized.jsonl", "appserver_overloaded.jsonl"} {
		if b, err := os.ReadFile(filepath.Join("testdata", n)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, s, _ := codex.New().AppServerRequest(adapters.Input{Prompt: "p", Workdir: "/w", Home: "/h"})
		checkStream(t, s, b)
		_ = s.Pending()
	})
}
