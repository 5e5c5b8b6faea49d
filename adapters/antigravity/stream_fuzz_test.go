package antigravity_test

import (
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/antigravity"
)

func FuzzDecodeStream(f *testing.F) {
	adaptertest.FuzzDecodeStream(f, func() adapters.Decoder { return antigravity.New().NewDecoder() }, "testdata")
}
