package wscopy

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, dir, rel, data string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), mode))
	require.NoError(t, os.Chmod(p, mode))
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	require.NoError(t, err)
	return string(b)
}

func owner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// TestCopyAndSync: the copy holds the tree but the skipped paths, owned as
// asked; what the lease changes in the copy (edits, new files and
// directories, deletions, a mode, a link, a directory turned into a file)
// comes back to the original, whose other entries and skipped paths stay.
func TestCopyAndSync(t *testing.T) {
	orig, cp := t.TempDir(), t.TempDir()
	write(t, orig, "keep.txt", "keep\n", 0o644)
	write(t, orig, "edit.txt", "old\n", 0o644)
	write(t, orig, "gone.txt", "bye\n", 0o644)
	write(t, orig, "run.sh", "#!/bin/sh\n", 0o644)
	write(t, orig, "dir/inner.txt", "inner\n", 0o600)
	write(t, orig, "becomes-file/x", "x\n", 0o644)
	write(t, orig, ".outpost/.env", "SECRET=1\n", 0o600)
	require.NoError(t, os.Symlink("keep.txt", filepath.Join(orig, "link")))

	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 4321, 4321
	}
	base, err := Copy(orig, cp, uid, gid, []string{".outpost"})
	require.NoError(t, err)
	assert.Equal(t, "old\n", read(t, cp, "edit.txt"))
	assert.Equal(t, "inner\n", read(t, cp, "dir/inner.txt"))
	_, err = os.Lstat(filepath.Join(cp, ".outpost"))
	assert.True(t, os.IsNotExist(err), "a skipped path is not copied")
	target, err := os.Readlink(filepath.Join(cp, "link"))
	require.NoError(t, err)
	assert.Equal(t, "keep.txt", target)
	if uid >= 0 {
		for _, rel := range []string{".", "edit.txt", "dir", "dir/inner.txt", "link"} {
			u, g := owner(t, filepath.Join(cp, rel))
			assert.Equal(t, [2]int{uid, gid}, [2]int{u, g}, rel)
		}
	}
	origOwner := map[string][2]int{}
	for _, rel := range []string{".", "keep.txt", "edit.txt", "run.sh", "dir", "dir/inner.txt"} {
		u, g := owner(t, filepath.Join(orig, rel))
		origOwner[rel] = [2]int{u, g}
	}

	// The lease's work.
	write(t, cp, "edit.txt", "new\n", 0o644)
	require.NoError(t, os.Chtimes(filepath.Join(cp, "edit.txt"), time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
	write(t, cp, "new/deep/file.txt", "fresh\n", 0o640)
	require.NoError(t, os.Remove(filepath.Join(cp, "gone.txt")))
	require.NoError(t, os.Chmod(filepath.Join(cp, "run.sh"), 0o755))
	require.NoError(t, os.Remove(filepath.Join(cp, "link")))
	require.NoError(t, os.Symlink("edit.txt", filepath.Join(cp, "link")))
	require.NoError(t, os.RemoveAll(filepath.Join(cp, "becomes-file")))
	write(t, cp, "becomes-file", "now a file\n", 0o644)
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(cp, "escape")))
	require.NoError(t, os.Symlink("../outside", filepath.Join(cp, "up")))
	require.NoError(t, os.Symlink("../../keep.txt", filepath.Join(cp, "new/deep/rel")))

	syncU, syncG := -1, -1
	if os.Geteuid() == 0 {
		syncU, syncG = 0, 0
	}
	require.NoError(t, Sync(cp, orig, base, syncU, syncG, []string{".outpost"}))
	assert.Equal(t, "keep\n", read(t, orig, "keep.txt"))
	assert.Equal(t, "new\n", read(t, orig, "edit.txt"))
	assert.Equal(t, "fresh\n", read(t, orig, "new/deep/file.txt"))
	assert.Equal(t, "now a file\n", read(t, orig, "becomes-file"))
	assert.Equal(t, "SECRET=1\n", read(t, orig, ".outpost/.env"), "a skipped path stays")
	_, err = os.Lstat(filepath.Join(orig, "gone.txt"))
	assert.True(t, os.IsNotExist(err), "a deletion comes back")
	fi, err := os.Stat(filepath.Join(orig, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(orig, "new/deep/file.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	target, err = os.Readlink(filepath.Join(orig, "link"))
	require.NoError(t, err)
	assert.Equal(t, "edit.txt", target)
	_, err = os.Lstat(filepath.Join(orig, "escape"))
	assert.True(t, os.IsNotExist(err), "no new link out of the workspace")
	_, err = os.Lstat(filepath.Join(orig, "up"))
	assert.True(t, os.IsNotExist(err), "no new link out of the workspace")
	target, err = os.Readlink(filepath.Join(orig, "new/deep/rel"))
	require.NoError(t, err)
	assert.Equal(t, "../../keep.txt", target, "a link inside is made as a link")
	for rel, want := range origOwner {
		u, g := owner(t, filepath.Join(orig, rel))
		assert.Equal(t, want, [2]int{u, g}, "%s keeps its owner", rel)
	}
	if syncU >= 0 {
		for _, rel := range []string{"new", "new/deep/file.txt", "becomes-file", "new/deep/rel"} {
			u, g := owner(t, filepath.Join(orig, rel))
			assert.Equal(t, [2]int{0, 0}, [2]int{u, g}, "%s is the workspace owner's", rel)
		}
	}

	// Nothing changed since: a second sync writes nothing.
	before, err := os.Stat(filepath.Join(orig, "keep.txt"))
	require.NoError(t, err)
	require.NoError(t, Sync(cp, orig, base, syncU, syncG, []string{".outpost"}))
	after, err := os.Stat(filepath.Join(orig, "keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, before.Sys().(*syscall.Stat_t).Ctim, after.Sys().(*syscall.Stat_t).Ctim, "an unchanged file is not rewritten")
}

// TestSyncWritesThroughNoLinkOfTheOriginal: a link in the original where the
// copy has a directory is replaced, never followed.
func TestSyncWritesThroughNoLinkOfTheOriginal(t *testing.T) {
	orig, cp, outside := t.TempDir(), t.TempDir(), t.TempDir()
	base, err := Copy(orig, cp, -1, -1, nil)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(outside, filepath.Join(orig, "d")))
	write(t, cp, "d/f.txt", "in\n", 0o644)
	require.NoError(t, Sync(cp, orig, base, -1, -1, nil))
	fi, err := os.Lstat(filepath.Join(orig, "d"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, "in\n", read(t, orig, "d/f.txt"))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written through the link")
}

// TestSyncWritesOnlyTheLeasesChanges: two leases on copies of one
// workspace write back in turn; the second leaves the first's changes (an
// edit, a new file, a deletion) alone where it changed nothing itself.
func TestSyncWritesOnlyTheLeasesChanges(t *testing.T) {
	orig, a, b := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, orig, "shared.txt", "v1\n", 0o644)
	write(t, orig, "doomed.txt", "x\n", 0o644)
	write(t, orig, "mine.txt", "b's\n", 0o644)
	baseA, err := Copy(orig, a, -1, -1, nil)
	require.NoError(t, err)
	baseB, err := Copy(orig, b, -1, -1, nil)
	require.NoError(t, err)

	write(t, a, "shared.txt", "v2 by a\n", 0o644)
	write(t, a, "new-by-a.txt", "a\n", 0o644)
	require.NoError(t, os.Remove(filepath.Join(a, "doomed.txt")))
	write(t, b, "mine.txt", "b's, edited\n", 0o644)
	require.NoError(t, os.Chtimes(filepath.Join(b, "mine.txt"), time.Now().Add(time.Hour), time.Now().Add(time.Hour)))

	require.NoError(t, Sync(a, orig, baseA, -1, -1, nil))
	require.NoError(t, Sync(b, orig, baseB, -1, -1, nil))
	assert.Equal(t, "v2 by a\n", read(t, orig, "shared.txt"), "b did not touch it")
	assert.Equal(t, "a\n", read(t, orig, "new-by-a.txt"), "b's copy lacks it, but b did not delete it")
	_, err = os.Lstat(filepath.Join(orig, "doomed.txt"))
	assert.True(t, os.IsNotExist(err), "b's unchanged copy does not bring it back")
	assert.Equal(t, "b's, edited\n", read(t, orig, "mine.txt"))
}
