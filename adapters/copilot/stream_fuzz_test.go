package copilot_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/copilot"
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
	f.Fuzz(func(t *testing.T, b []byte) { checkStream(t, copilot.NewDecoder(), b) })
}

// FuzzLiveDecodeStream: the same for an ACP session.
func FuzzLiveDecodeStream(f *testing.F) {
	seedStreams(f, filepath.Join("testdata", "live"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, s, _ := copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w"})
		checkStream(t, s, b)
	})
}
