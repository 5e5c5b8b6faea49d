package claude

import (
	"path"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
)

var _ adapters.Storage = (*Adapter)(nil)

// ProjectKey is the directory name Claude Code files a working directory's
// transcripts under: the absolute path with every character that is not a
// letter or digit replaced by '-'.
func ProjectKey(cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// ConversationPaths implements [adapters.Storage]: the transcript
// .claude/projects/<key>/<id>.jsonl, then its sidecar directory (subagent
// transcripts), which may be absent.
func (a *Adapter) ConversationPaths(id, cwd string) []string {
	dir := path.Join(".claude", "projects", ProjectKey(cwd))
	return []string{path.Join(dir, id+".jsonl"), path.Join(dir, id)}
}

// Relocate implements [adapters.Storage]: Claude looks a transcript up
// under the key of its current directory, so the file moves to the new
// key, and every "cwd" field equal to the old directory is rewritten.
func (a *Adapter) Relocate(p string, content []byte, oldCwd, newCwd string) (string, []byte) {
	if oldCwd == newCwd || oldCwd == "" || newCwd == "" {
		return p, content
	}
	oldDir := path.Join(".claude", "projects", ProjectKey(oldCwd)) + "/"
	if rest, ok := strings.CutPrefix(p, oldDir); ok {
		p = path.Join(".claude", "projects", ProjectKey(newCwd), rest)
	}
	return p, adapters.RelocateJSON(content, oldCwd, newCwd, "cwd")
}
