package claude_test

import (
	"testing"

	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
)

// TestGolden replays every fixture captured from the real claude 2.1.328
// through the harness and compares events and outcome with expected.json.
func TestGolden(t *testing.T) {
	adaptertest.Run(t, claude.New(), "testdata")
}
