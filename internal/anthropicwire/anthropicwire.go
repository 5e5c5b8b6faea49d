// Package anthropicwire reads the content blocks of Anthropic Messages API
// messages. Both ends of that wire meet them: Claude Code's stream-json
// carries the API's messages (package adapters/claude), and the scripted
// model server reads them from requests (package outposttest).
package anthropicwire

import (
	"encoding/json"
	"strings"

	"github.com/outpost-dev/outpost/internal/jsonl"
)

// Block is one content block: text, thinking, tool_use (and its server and
// MCP kinds) or tool_result. Fields a kind lacks stay empty.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Blocks decodes a content field, which is a string (one text block) or a
// list of blocks. A field of the wrong type in a block leaves that field
// empty and keeps the rest; content that is neither form is nil.
func Blocks(raw json.RawMessage) []Block {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return []Block{{Type: "text", Text: s}}
	case '[':
		var bs []Block
		if !jsonl.Lenient(raw, &bs) {
			return nil
		}
		return bs
	}
	return nil
}

// ContentText flattens a tool_result block's content: a string as it is,
// a list of blocks as their text joined by newlines, where a block that is
// not text shows as "[type]" (an image as "[image]").
func ContentText(raw json.RawMessage) string {
	bs := Blocks(raw)
	var sb strings.Builder
	for i, b := range bs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		if b.Type == "text" {
			sb.WriteString(b.Text)
		} else {
			sb.WriteString("[" + b.Type + "]")
		}
	}
	return sb.String()
}
