package adapters_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

func TestParseLineSkipsMistypedFields(t *testing.T) {
	var v struct {
		A string `json:"a"`
		B int    `json:"b"`
	}
	assert.True(t, adapters.ParseLine([]byte(`{"a":"x","b":"not a number"}`), &v))
	assert.Equal(t, "x", v.A)
	assert.False(t, adapters.ParseLine([]byte(`{"a":`), &v))
	assert.False(t, adapters.ParseLine([]byte(`Error: boom`), &v))
}

func TestToolEventDropsInvalidInput(t *testing.T) {
	in := json.RawMessage(`{"command":"ls"}`)
	ev := adapters.ToolEvent("c1", "shell", in)
	assert.Equal(t, adapters.KindTool, ev.Kind)
	assert.JSONEq(t, `{"command":"ls"}`, string(ev.Tool.Input))
	in[2] = 'X'
	assert.JSONEq(t, `{"command":"ls"}`, string(ev.Tool.Input), "the input is copied")
	assert.Nil(t, adapters.ToolEvent("c1", "shell", json.RawMessage(`{"x"`)).Tool.Input)
	assert.Nil(t, adapters.ToolEvent("c1", "shell", nil).Tool.Input)
}

func TestToolResultEventBoundsPreview(t *testing.T) {
	out := string(make([]rune, adapters.PreviewLimit)) + "é"
	ev := adapters.ToolResultEvent("c1", "shell", true, out)
	assert.Equal(t, adapters.PreviewLimit, len(ev.ToolResult.Preview))
	assert.Equal(t, adapters.PreviewLimit+1, ev.ToolResult.Characters)
	assert.True(t, ev.ToolResult.IsError)
}

func TestErrorMessageAndJSONString(t *testing.T) {
	assert.Equal(t, "boom", adapters.ErrorMessage(json.RawMessage(`{"message":"boom"}`)))
	assert.Equal(t, "boom", adapters.ErrorMessage(json.RawMessage(`"boom"`)))
	assert.Empty(t, adapters.ErrorMessage(json.RawMessage(`42`)))
	assert.Empty(t, adapters.ErrorMessage(nil))
	assert.Equal(t, "a", adapters.JSONString(json.RawMessage(`"a"`)))
	assert.Empty(t, adapters.JSONString(json.RawMessage(`{"a":1}`)))
}

func TestInclusiveUsage(t *testing.T) {
	n := int64(-5)
	u := adapters.InclusiveUsage(100, 30, 7, 20, 4)
	assert.Equal(t, int64(70), u.Input)
	assert.Equal(t, int64(30), u.Cached)
	assert.Equal(t, int64(7), u.CacheCreated)
	assert.Equal(t, int64(20), u.Output)
	assert.Equal(t, int64(4), u.Reasoning)
	assert.Zero(t, adapters.InclusiveUsage(10, 30, 0, 0, 0).Input, "never negative")
	assert.Zero(t, usage.Count(&n))
	assert.Zero(t, usage.Count(nil))
}

func TestDecodeJSON(t *testing.T) {
	type line struct {
		Type string `json:"type"`
	}
	known := func(l *line) []adapters.Event {
		if l.Type != "text" {
			return nil
		}
		return []adapters.Event{{Kind: adapters.KindText, Text: "t"}}
	}
	assert.Equal(t, []adapters.Event{{Kind: adapters.KindText, Text: "t"}},
		adapters.DecodeJSON([]byte(`{"type":"text"}`), known))
	assert.Equal(t, []adapters.Event{{Kind: adapters.KindRaw, Raw: json.RawMessage(`{"type":"other"}`)}},
		adapters.DecodeJSON([]byte(" {\"type\":\"other\"}\n"), known), "an unknown line travels as itself, trimmed")
	assert.Equal(t, []adapters.Event{{Kind: adapters.KindRaw, Raw: json.RawMessage(`"not json"`)}},
		adapters.DecodeJSON([]byte(`not json`), known))
	long := []byte(`{"type":"other","pad":"` + strings.Repeat("x", adapters.RawLimit) + `"}`)
	assert.Equal(t, []adapters.Event{adapters.RawEvent(long)}, adapters.DecodeJSON(long, known),
		"an unknown line over the bound is cut as RawEvent cuts it")
}
