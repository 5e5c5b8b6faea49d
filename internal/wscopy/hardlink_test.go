//go:build unix

package wscopy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncDoesNotWriteThroughAHardLink: a file of the original that is a
// hard link to a file outside the workspace (a package manager's store, as
// pnpm links node_modules) gets the lease's edit; the file outside keeps
// its content: the write-back reaches nothing but the workspace.
func TestSyncDoesNotWriteThroughAHardLink(t *testing.T) {
	orig, cp, store := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, store, "index.js", "module.exports = 1\n", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(orig, "node_modules", "dep"), 0o755))
	require.NoError(t, os.Link(filepath.Join(store, "index.js"), filepath.Join(orig, "node_modules", "dep", "index.js")))
	before, err := os.Lstat(filepath.Join(orig, "node_modules", "dep", "index.js"))
	require.NoError(t, err)
	base, err := Copy(orig, cp, -1, -1, nil)
	require.NoError(t, err)

	write(t, cp, "node_modules/dep/index.js", "steal()\n", 0o644)
	require.NoError(t, os.Chtimes(filepath.Join(cp, "node_modules/dep/index.js"), time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
	require.NoError(t, Sync(cp, orig, base, -1, -1, nil))

	assert.Equal(t, "steal()\n", read(t, orig, "node_modules/dep/index.js"), "the workspace gets the lease's change")
	assert.Equal(t, "module.exports = 1\n", read(t, store, "index.js"), "the file outside the workspace is not written")
	after, err := os.Lstat(filepath.Join(orig, "node_modules", "dep", "index.js"))
	require.NoError(t, err)
	u0, g0 := owner(t, filepath.Join(store, "index.js"))
	u1, g1 := owner(t, filepath.Join(orig, "node_modules", "dep", "index.js"))
	assert.Equal(t, [2]int{u0, g0}, [2]int{u1, g1}, "its owner stays")
	assert.Equal(t, before.Mode(), after.Mode())
}
