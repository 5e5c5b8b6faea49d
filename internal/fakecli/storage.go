package fakecli

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
)

// StorageAdapter is the fake CLI with conversation storage: it keeps
// conversation ID in $HOME/.fake/sessions/ID.jsonl and, optionally, the
// directory $HOME/.fake/sessions/ID/ (the script commands write, cat and
// hooks shape and inspect them).
type StorageAdapter struct{ *Adapter }

// NewStorage returns the fake adapter with conversation storage.
func NewStorage(path string) *StorageAdapter { return &StorageAdapter{New(path)} }

// Name implements adapters.Adapter.
func (a *StorageAdapter) Name() string { return "fake-store" }

var _ adapters.Storage = (*StorageAdapter)(nil)

// SessionsDir is the fake CLI's home-relative conversation directory.
const SessionsDir = ".fake/sessions"

// HookFile is the fake CLI's "settings": a shell script it runs at start
// when the script says hooks, as a real CLI runs its configured hooks.
const HookFile = ".fake/hook.sh"

// ConversationPaths implements adapters.Storage.
func (a *StorageAdapter) ConversationPaths(id, cwd string) []string {
	return []string{path.Join(SessionsDir, id+".jsonl"), path.Join(SessionsDir, id)}
}

// Relocate implements adapters.Storage: "cwd" fields move.
func (a *StorageAdapter) Relocate(p string, content []byte, oldCwd, newCwd string) (string, []byte) {
	if oldCwd == newCwd || oldCwd == "" || newCwd == "" {
		return p, content
	}
	return p, adapters.RelocateJSON(content, oldCwd, newCwd, "cwd")
}

// storageCommand runs the storage script commands; false for others.
//
//	write PATH BYTES   write BYTES bytes to $HOME/PATH (directories made), in 1 MiB lines
//	put PATH TEXT      write TEXT and a newline to $HOME/PATH (directories made)
//	cat PATH           emit a text event "PATH: CONTENT" (or "PATH missing")
//	hooks              run $HOME/.fake/hook.sh with sh, if present
func storageCommand(cmd, arg string, emitText func(string)) bool {
	home, _ := os.UserHomeDir()
	switch cmd {
	case "write":
		p, n, _ := strings.Cut(arg, " ")
		size, _ := strconv.ParseInt(n, 10, 64)
		full := filepath.Join(home, filepath.FromSlash(p))
		_ = os.MkdirAll(filepath.Dir(full), 0o700)
		f, err := os.Create(full)
		if err != nil {
			emitText("write " + p + ": " + err.Error())
			return true
		}
		line := bytes.Repeat([]byte("x"), 1<<20)
		line[len(line)-1] = '\n'
		for size > 0 {
			k := min(size, int64(len(line)))
			if _, err := f.Write(line[:k]); err != nil {
				break
			}
			size -= k
		}
		_ = f.Close()
	case "put":
		p, text, _ := strings.Cut(arg, " ")
		full := filepath.Join(home, filepath.FromSlash(p))
		_ = os.MkdirAll(filepath.Dir(full), 0o700)
		_ = os.WriteFile(full, []byte(text+"\n"), 0o600)
	case "cat":
		b, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(arg)))
		if err != nil {
			emitText(arg + " missing")
		} else {
			emitText(arg + ": " + string(b))
		}
	case "hooks":
		hook := filepath.Join(home, filepath.FromSlash(HookFile))
		if _, err := os.Stat(hook); err == nil {
			_ = exec.Command("sh", hook).Run()
		}
	default:
		return false
	}
	return true
}
