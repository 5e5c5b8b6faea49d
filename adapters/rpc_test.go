package adapters_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
)

func TestAppendJSONLine(t *testing.T) {
	b := adapters.AppendJSONLine([]byte("x\n"), map[string]string{"text": "<a&b>"})
	assert.Equal(t, "x\n{\"text\":\"<a&b>\"}\n", string(b), "one line, appended, no HTML escapes")
}

func TestOutbox(t *testing.T) {
	var o adapters.Outbox
	assert.Empty(t, o.Pending())
	o.Queue([]byte("a\n"))
	o.Queue([]byte("b\n"))
	assert.Equal(t, "a\nb\n", string(o.Pending()))
	assert.Empty(t, o.Pending(), "Pending forgets what it returned")
}

func TestIsRequestID(t *testing.T) {
	assert.True(t, adapters.IsRequestID(json.RawMessage(`3`)))
	assert.True(t, adapters.IsRequestID(json.RawMessage(`"a"`)))
	assert.False(t, adapters.IsRequestID(json.RawMessage(`null`)))
	assert.False(t, adapters.IsRequestID(nil))
	assert.Equal(t, &adapters.RPCError{Code: -32601, Message: "outpost: fs/read is not supported in a headless turn"}, adapters.Unsupported("fs/read"))
}

func TestRelocateJSON(t *testing.T) {
	in := `{"cwd":"/w/a","gitRoot":"/w/a","other":"/w/a"}` + "\n" + `{"cwd":"/w/ab"}`
	got := adapters.RelocateJSON([]byte(in), "/w/a", "/w/b", "cwd", "gitRoot")
	assert.Equal(t, `{"cwd":"/w/b","gitRoot":"/w/b","other":"/w/a"}`+"\n"+`{"cwd":"/w/ab"}`, string(got),
		"only the named fields, only whole values")
}
