//go:build unix

package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFileRefusesLinks(t *testing.T) {
	base := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("MARK-secret"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "a", "b"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(base, "a", "b", "ok"), []byte("fine"), 0o600))

	b, fi, err := ReadFile(base, "a/b/ok", 100)
	require.NoError(t, err)
	assert.Equal(t, "fine", string(b))
	assert.True(t, fi.Mode().IsRegular())

	// A link as the file, as a directory, to something inside the base too.
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(base, "a", "b", "file-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(base, "a", "dir-link")))
	require.NoError(t, os.Symlink("ok", filepath.Join(base, "a", "b", "inner-link")))
	for _, rel := range []string{"a/b/file-link", "a/dir-link/secret", "a/b/inner-link"} {
		_, _, err := ReadFile(base, rel, 100)
		require.ErrorIs(t, err, ErrLink, rel)
		assert.NotContains(t, err.Error(), "MARK-secret")
	}
	for _, rel := range []string{"../x", "/etc/passwd", "a/../../x"} {
		_, _, err := ReadFile(base, rel, 100)
		assert.Error(t, err, rel)
	}
	_, _, err = ReadFile(base, "a/b/missing", 100)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, _, err = ReadFile(base, "a/b", 100)
	assert.ErrorIs(t, err, ErrNotRegular)
	_, _, err = ReadFile(base, "a/b/ok/x", 100)
	assert.Error(t, err)
	_, _, err = ReadFile(base, "a/b/ok", 3)
	assert.ErrorIs(t, err, ErrTooLarge)
}

func TestReadFileFIFODoesNotBlock(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(base, "fifo"), 0o600))
	done := make(chan error, 1)
	go func() {
		_, _, err := ReadFile(base, "fifo", 100)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotRegular)
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
}

func TestOpenDir(t *testing.T) {
	base := t.TempDir()
	r, err := OpenDir(base, "x/y/z", true)
	require.NoError(t, err)
	require.NoError(t, r.WriteFile("f", []byte("1"), 0o600))
	r.Close()
	fi, err := os.Stat(filepath.Join(base, "x", "y"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(base, "x", "link")))
	_, err = OpenDir(base, "x/link/sub", true)
	require.ErrorIs(t, err, ErrLink)
	entries, _ := os.ReadDir(outside)
	assert.Empty(t, entries, "nothing created through the link")

	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o600))
	_, err = OpenDir(base, "file/sub", true)
	assert.ErrorIs(t, err, ErrNotDir)
	_, err = OpenDir(base, "missing", false)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	r, err = OpenDir(base, ".", false)
	require.NoError(t, err)
	r.Close()
}

func TestCheckOwner(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	fi, _ := os.Stat(p)
	assert.NoError(t, CheckOwner(p, fi))
	require.NoError(t, os.Chmod(p, 0o666))
	fi, _ = os.Stat(p)
	assert.ErrorIs(t, CheckOwner(p, fi), ErrOwner)
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(p, 0o600))
		require.NoError(t, os.Chown(p, 4242, 4242))
		fi, _ = os.Stat(p)
		err := CheckOwner(p, fi)
		assert.ErrorIs(t, err, ErrOwner)
		assert.Contains(t, err.Error(), "uid 4242")
	}
}

// TestRemoveAllIn: the tree goes, read-only directories included; a link
// in it (or as the entry) is removed, never what it points to.
func TestRemoveAllIn(t *testing.T) {
	base := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600))
	tree := filepath.Join(base, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "ro", "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(tree, "ro", "sub", "f"), []byte("x"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(tree, "ro", "out")))
	require.NoError(t, os.Chmod(filepath.Join(tree, "ro", "sub"), 0o500))
	require.NoError(t, os.Chmod(filepath.Join(tree, "ro"), 0o500))
	require.NoError(t, os.Symlink(outside, filepath.Join(base, "link")))

	root, err := os.OpenRoot(base)
	require.NoError(t, err)
	defer root.Close()
	require.NoError(t, RemoveAllIn(root, "tree"))
	assert.NoDirExists(t, tree)
	require.NoError(t, RemoveAllIn(root, "link"))
	_, err = os.Lstat(filepath.Join(base, "link"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.FileExists(t, filepath.Join(outside, "keep"))
	require.NoError(t, RemoveAllIn(root, "missing"))
	assert.Error(t, RemoveAllIn(root, "../x"))
	assert.Error(t, RemoveAllIn(root, "a/b"))
}
