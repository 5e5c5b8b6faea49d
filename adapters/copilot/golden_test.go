package copilot_test

import (
	"testing"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/copilot"
)

// TestGolden replays every fixture captured from the real copilot 1.0.102
// through the harness and compares events and outcome with expected.json.
func TestGolden(t *testing.T) {
	adaptertest.Run(t, copilot.New(), "testdata")
}

// FuzzDecode: the decoder never panics and turns every non-empty line into
// at least one valid event. Seeded with every fixture line.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":1}]}}`))
	f.Add([]byte(`{"type":"result","exitCode":"0"}`))
	f.Add([]byte(`{"type":"session.shutdown","data":{"modelMetrics":{"m":{"usage":{"inputTokens":-5}}}}}`))
	f.Add([]byte(`{"type":"tool.execution_complete","data":{"toolCallId":"x","success":false,"error":{"message":"boom"}}}`))
	f.Add([]byte("Error: No session, task, or name matched 'x'."))
	adaptertest.FuzzDecode(f, func() adapters.Adapter { return copilot.New() }, "testdata")
}
