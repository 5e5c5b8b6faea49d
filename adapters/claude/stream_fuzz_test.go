package claude_test

import (
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
)

func FuzzDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder { return claude.NewDecoder() }, "testdata")
}

// FuzzLiveDecodeStream: the same for a live session.
func FuzzLiveDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder {
		n := 0
		_, s, _ := claude.New(claude.WithMessageIDs(func() string { n++; return string(rune('a' + n%26)) })).LiveRequest(adapters.Input{Prompt: "p"})
		return s
	}, filepath.Join("testdata", "live"))
}
