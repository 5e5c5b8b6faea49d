package antigravity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
)

func eventOf(evs []adapters.Event, k adapters.Kind) *adapters.Event {
	for i := range evs {
		if evs[i].Kind == k {
			return &evs[i]
		}
	}
	return nil
}

// A field of an unexpected type, even one the decoder never reads, must
// not cost the rest of the line: the terminal result keeps its verdict and
// error text, a tool step its result.
func TestDecodeOddFieldKeepsLine(t *testing.T) {
	d := New().NewDecoder()
	evs := d.Decode([]byte(`{"event":"result","result":{"status":"ERROR","response":"","error":"RESOURCE_EXHAUSTED (code 429): Individual quota reached.","duration_seconds":"14.75s","num_turns":1}}`))
	fin := eventOf(evs, adapters.KindFinished)
	require.NotNil(t, fin, "the result line kept its finished event: %+v", evs)
	assert.False(t, fin.Finished.OK)
	f := eventOf(evs, adapters.KindFailure)
	require.NotNil(t, f)
	assert.Contains(t, f.Text, "Individual quota reached")

	evs = d.Decode([]byte(`{"event":"step_update","step_update":{"step_type":"tool","step_index":2,"state":"DONE","tool_name":"view_file","output":{"stdout":"ok"},"tool_info":{"result":"exit code 0"}}}`))
	require.NotNil(t, eventOf(evs, adapters.KindToolResult), "the tool step kept its result: %+v", evs)
}

// Characters counts characters, as every adapter's tool results do.
func TestDecodeToolResultCharacters(t *testing.T) {
	d := New().NewDecoder()
	evs := d.Decode([]byte(`{"event":"step_update","step_update":{"step_type":"tool","step_index":1,"state":"DONE","tool_name":"run_command","output":"héllo ✓"}}`))
	r := eventOf(evs, adapters.KindToolResult)
	require.NotNil(t, r)
	assert.Equal(t, 7, r.ToolResult.Characters)
}
