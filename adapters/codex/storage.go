package codex

import (
	"path"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
)

var (
	_ adapters.Storage       = (*Adapter)(nil)
	_ adapters.StorageFilter = (*Adapter)(nil)
)

// sessionsDir holds Codex rollouts: sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl.
const sessionsDir = ".codex/sessions"

// ConversationPaths implements [adapters.Storage]: the sessions tree, of
// which [Adapter.Keep] captures only the thread's own rollout. Verified
// with 0.169.0: restoring the rollout alone (same relative path) into a
// fresh CODEX_HOME before Codex starts is enough to resume the thread.
func (a *Adapter) ConversationPaths(id, cwd string) []string { return []string{sessionsDir} }

// Keep implements [adapters.StorageFilter]: the rollout whose name ends
// with the thread id.
func (a *Adapter) Keep(id, p string) bool {
	base := path.Base(p)
	return strings.HasPrefix(base, "rollout-") && strings.HasSuffix(base, "-"+id+".jsonl")
}

// Relocate implements [adapters.Storage]: the path is kept (Codex finds
// threads by id, not by directory) and every "cwd" field equal to the old
// directory (session_meta, turn_context) is rewritten.
func (a *Adapter) Relocate(p string, content []byte, oldCwd, newCwd string) (string, []byte) {
	if oldCwd == newCwd || oldCwd == "" || newCwd == "" {
		return p, content
	}
	return p, adapters.RelocateJSON(content, oldCwd, newCwd, "cwd")
}
