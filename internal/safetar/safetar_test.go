package safetar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEntryNameRefusesWhatCouldLeave(t *testing.T) {
	for _, raw := range []string{
		"", "/etc/passwd", `\windows`, "../x", "a/../../x", "a/..", "..", "a/b\x00c",
	} {
		_, err := EntryName(raw)
		assert.ErrorIs(t, err, ErrUnsafe, "%q", raw)
	}
	for raw, want := range map[string]string{
		"a": "a", "./a/b/": "a/b", "./": ".", ".": ".", "a//b": "a/b", "a\\b": "a\\b", "..a/b..": "..a/b..",
	} {
		got, err := EntryName(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, want, got, raw)
	}
}

func TestCheckLinkRefusesEscapes(t *testing.T) {
	for _, c := range [][2]string{
		{"l", ""},
		{"l", "/"},
		{"l", "/etc/passwd"},
		{"l", ".."},
		{"l", "../"},
		{"a/b/l", "../../../victim"},
		{"a/l", "b/../../../x"},
		{"l", "x\x00y"},
		{"a/l", "b/../x"},
		{"p/L", "q/../.."},
		{"l", "x/.."},
	} {
		assert.ErrorIs(t, CheckLink(c[0], c[1]), ErrUnsafe, "%s -> %q", c[0], c[1])
	}
	for _, c := range [][2]string{
		{"l", "x"},
		{"l", "."},
		{"a/b/l", "../../x"},
		{"a/l", "../a/b"},
		{"node_modules/.bin/x", "../x/bin/x.js"},
		{"a/l", "./../b"},
	} {
		assert.NoError(t, CheckLink(c[0], c[1]), "%s -> %q", c[0], c[1])
	}
}

// entries reads a tar stream into name -> content+link target.
func entries(t *testing.T, b []byte) map[string]string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		got[h.Name] = string(content) + h.Linkname
	}
}

func write(t *testing.T, tree Tree) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := tree.Write(context.Background(), tw)
	require.NoError(t, tw.Close())
	return b.Bytes(), err
}

// fixture: d/ with a file, a link out of the tree, a pipe, and d/skip/.
func fixture(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(dir+"/d/skip", 0o755))
	require.NoError(t, os.WriteFile(dir+"/d/f", []byte("hello"), 0o640))
	require.NoError(t, os.WriteFile(dir+"/d/skip/g", []byte("hidden"), 0o640))
	require.NoError(t, os.Symlink("/etc/passwd", dir+"/d/l"))
	require.NoError(t, syscall.Mkfifo(dir+"/d/p", 0o600))
	return dir
}

// TestTreeWritesLinksAsLinks: directories, files with their content and
// links (never followed) are written under names relative to Dir, after
// Edit; a pipe is left out; Filter prunes; Written hears what was written.
func TestTreeWritesLinksAsLinks(t *testing.T) {
	dir := fixture(t)
	written := map[string]bool{}
	b, err := write(t, Tree{
		Dir: dir,
		Top: "d",
		Filter: func(name string, isDir bool) (Pick, error) {
			if name == "d/skip" {
				return Prune, nil
			}
			return Keep, nil
		},
		Edit:    func(h *tar.Header) { h.Uname = "edited" },
		Written: func(name string) { written[name] = true },
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"d/": "", "d/f": "hello", "d/l": "/etc/passwd"}, entries(t, b))
	assert.Equal(t, map[string]bool{"d": true, "d/f": true, "d/l": true}, written)

	// Omit leaves a directory out but not its content.
	b, err = write(t, Tree{Dir: dir + "/d", Filter: func(name string, isDir bool) (Pick, error) {
		if name == "skip" {
			return Omit, nil
		}
		return Keep, nil
	}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"f": "hello", "l": "/etc/passwd", "skip/g": "hidden"}, entries(t, b))

	// A Top that is a link is that link, not what it leads to.
	b, err = write(t, Tree{Dir: dir + "/d", Top: "l"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"l": "/etc/passwd"}, entries(t, b))
}

func TestTreeRefusesSpecialFilesWhenAsked(t *testing.T) {
	_, err := write(t, Tree{Dir: fixture(t), RefuseSpecial: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "d/p is not a regular file")
}

func TestTreeBoundsEntriesAndBytes(t *testing.T) {
	dir := fixture(t)
	_, err := write(t, Tree{Dir: dir, MaxEntries: 3})
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = write(t, Tree{Dir: dir, MaxBytes: int64(len("hello") + len("hidden") - 1)})
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = write(t, Tree{Dir: dir, MaxEntries: 6, MaxBytes: int64(len("hello") + len("hidden"))})
	assert.NoError(t, err)
}

// TestTreeDoesNotReadThroughADirectoryLink: a directory swapped for a link
// out of the tree is written as the link, never walked.
func TestTreeDoesNotReadThroughADirectoryLink(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	b, err := write(t, Tree{Dir: dir})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"out": outside}, entries(t, b))
}

func TestTreeStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Tree{Dir: fixture(t)}.Write(ctx, tar.NewWriter(io.Discard))
	assert.ErrorIs(t, err, context.Canceled)
}
