package copilot_test

import (
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/copilot"
)

func FuzzDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder { return copilot.NewDecoder() }, "testdata")
}

// FuzzLiveDecodeStream: the same for an ACP session.
func FuzzLiveDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder {
		_, s, _ := copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w"})
		return s
	}, filepath.Join("testdata", "live"))
}
