package anthropicwire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBlocks(t *testing.T) {
	assert.Equal(t, []Block{{Type: "text", Text: "hi \"there\""}}, Blocks(json.RawMessage(`"hi \"there\""`)))
	bs := Blocks(json.RawMessage(`[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},` +
		`{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":true},{"type":"thinking","thinking":"hm"}]`))
	assert.Equal(t, []Block{
		{Type: "tool_use", ID: "t1", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		{Type: "tool_result", ToolUseID: "t1", Content: json.RawMessage(`"ok"`), IsError: true},
		{Type: "thinking", Thinking: "hm"},
	}, bs)
	// A field of the wrong type is left empty; the rest is kept.
	assert.Equal(t, []Block{{Type: "text", Text: "kept"}}, Blocks(json.RawMessage(`[{"type":"text","text":"kept","is_error":"yes"}]`)))
	for _, raw := range []string{``, `null`, `{}`, `5`, `[`, `"unterminated`} {
		assert.Nil(t, Blocks(json.RawMessage(raw)), raw)
	}
}

func TestContentText(t *testing.T) {
	assert.Equal(t, "plain", ContentText(json.RawMessage(`"plain"`)))
	assert.Equal(t, "a\n[image]\nb", ContentText(json.RawMessage(
		`[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]`)))
	assert.Empty(t, ContentText(nil))
	assert.Empty(t, ContentText(json.RawMessage(`{"type":"text"}`)))
}
