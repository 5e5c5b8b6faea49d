package codex_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/codex"
)

func FuzzDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder { return codex.NewDecoder() }, "testdata")
}

// FuzzAppServerDecodeStream: the same for an app-server session, seeded with
// its recorded streams.
func FuzzAppServerDecodeStream(f *testing.F) {
	var seeds [][]byte
	for _, n := range []string{"appserver_live.jsonl", "appserver_rate_limit.jsonl", "appserver_unauthorized.jsonl", "appserver_overloaded.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder {
		_, s, _ := codex.New().AppServerRequest(adapters.Input{Prompt: "p", Workdir: "/w", Home: "/h"})
		return s
	}, "", seeds...)
}
