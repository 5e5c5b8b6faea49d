package fakecli

import (
	"testing"

	"github.com/outpost-dev/outpost/adapters/adaptertest"
)

func TestGolden(t *testing.T) { adaptertest.Run(t, New("fake"), "testdata") }

func TestGoldenStorage(t *testing.T) { adaptertest.Run(t, NewStorage("fake"), "store/testdata") }
