package claude

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStorageRelocate(t *testing.T) {
	a := New()
	assert.Equal(t, "-tmp-outpost-host-1-ws", ProjectKey("/tmp/outpost-host-1/ws"))
	assert.Equal(t, "-workspace", ProjectKey("/workspace"))
	paths := a.ConversationPaths("abc", "/workspace")
	assert.Equal(t, []string{".claude/projects/-workspace/abc.jsonl", ".claude/projects/-workspace/abc"}, paths)

	content := []byte(`{"cwd":"/tmp/a","x":1}` + "\n" + `{"cwd":"/tmp/a/sub","note":"/tmp/a"}` + "\n")
	p, got := a.Relocate(".claude/projects/-tmp-a/abc/subagents/s.jsonl", content, "/tmp/a", "/workspace")
	assert.Equal(t, ".claude/projects/-workspace/abc/subagents/s.jsonl", p)
	assert.Equal(t, `{"cwd":"/workspace","x":1}`+"\n"+`{"cwd":"/tmp/a/sub","note":"/tmp/a"}`+"\n", string(got),
		"only cwd fields equal to the old directory are rewritten")
	p, got = a.Relocate("x.jsonl", content, "/w", "/w")
	assert.Equal(t, "x.jsonl", p)
	assert.Equal(t, content, got)
}
