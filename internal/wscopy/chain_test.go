package wscopy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncMakesNoChainOfLinksOut: two new links that each look inside
// ("q" -> "." and "x" -> "q/..") but together lead out of the workspace are
// not both made in the original: x would name the workspace's parent.
func TestSyncMakesNoChainOfLinksOut(t *testing.T) {
	orig, cp := t.TempDir(), t.TempDir()
	base, err := Copy(orig, cp, -1, -1, nil)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(".", filepath.Join(cp, "q")))
	require.NoError(t, os.Symlink("q/..", filepath.Join(cp, "x")))
	require.NoError(t, Sync(cp, orig, base, -1, -1, nil))
	assertNoLinkOut(t, orig)
}

// TestSyncMakesNoLinkOutThroughALinkedParent: a directory the lease left as
// it was became a link in the original meanwhile ("d" -> ".", another
// lease's write-back); a new link "d/l" -> ".." of the lease, inside as its
// name says, would land at the top of the original and lead out.
func TestSyncMakesNoLinkOutThroughALinkedParent(t *testing.T) {
	orig, cp := t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(orig, "d"), 0o755))
	base, err := Copy(orig, cp, -1, -1, nil)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(orig, "d")))
	require.NoError(t, os.Symlink(".", filepath.Join(orig, "d")))
	require.NoError(t, os.Symlink("..", filepath.Join(cp, "d", "l")))
	require.NoError(t, Sync(cp, orig, base, -1, -1, nil))
	assertNoLinkOut(t, orig)
}

// assertNoLinkOut fails for any link in dir that resolves outside it.
func assertNoLinkOut(t *testing.T, dir string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return err
		}
		got, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // dangling: leads nowhere
		}
		rel, err := filepath.Rel(real, got)
		require.NoError(t, err)
		assert.True(t, filepath.IsLocal(rel) || rel == ".", "link %s leads out of the workspace to %s", p, got)
		return nil
	}))
}
