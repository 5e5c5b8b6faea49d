package codex_test

import (
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/codex"
)

// TestGolden replays every fixture captured from the real codex 0.169.0
// through the harness and compares events and outcome with expected.json.
func TestGolden(t *testing.T) {
	adaptertest.Run(t, codex.New(), "testdata")
}

// FuzzDecode: the decoder never panics and turns every non-empty line into
// at least one valid event. Seeded with every fixture line.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"type":"item.completed","item":{"type":"command_execution","exit_code":"x"}}`))
	f.Add([]byte(`{"type":"error","message":"Reconnecting... 99999999999999999999/5 (x)"}`))
	f.Add([]byte(`{"type":"turn.completed","usage":{"input_tokens":-5}}`))
	f.Add([]byte(`{"type":"item.completed","item":{"type":"mcp_tool_call","result":{"content":[{"type":"image"}]},"error":{"message":"boom"}}}`))
	adaptertest.FuzzDecode(f, func() adapters.Adapter { return codex.New() }, "testdata")
}
