package host

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// hdr is a handcrafted tar entry.
type hdr struct {
	name     string
	typ      byte
	mode     int64
	body     string
	linkname string
}

func mkTar(t testing.TB, entries ...hdr) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.linkname, ModTime: time.Unix(1_600_000_000, 0)}
		if e.typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": e.name}}
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// tree lists every path under root (relative), for "nothing escaped" checks.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	}))
	sort.Strings(out)
	return out
}

// sandboxDirs returns an outer directory and the extraction destination
// inside it; anything appearing in outer but not under dest escaped.
func sandboxDirs(t *testing.T) (outer, dest string) {
	t.Helper()
	outer = t.TempDir()
	dest = filepath.Join(outer, "dest")
	require.NoError(t, os.Mkdir(dest, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outer, "victim"), []byte("original"), 0o644))
	return outer, dest
}

func TestExtractRefusesBreakouts(t *testing.T) {
	cases := map[string][]hdr{
		"absolute name":           {{name: "/etc/outpost-pwned", typ: tar.TypeReg, mode: 0o644, body: "x"}},
		"dotdot":                  {{name: "../victim", typ: tar.TypeReg, mode: 0o644, body: "pwned"}},
		"dotdot deep":             {{name: "a/b/../../../victim", typ: tar.TypeReg, mode: 0o644, body: "pwned"}},
		"dotdot dir":              {{name: "../escaped/", typ: tar.TypeDir, mode: 0o755}},
		"dotdot trailing":         {{name: "a/..", typ: tar.TypeDir, mode: 0o755}},
		"symlink relative":        {{name: "l", typ: tar.TypeSymlink, linkname: "../"}, {name: "l/victim", typ: tar.TypeReg, mode: 0o644, body: "pwned"}},
		"symlink absolute":        {{name: "l", typ: tar.TypeSymlink, linkname: "/"}, {name: "l/tmp/x", typ: tar.TypeReg, body: "pwned"}},
		"symlink to file":         {{name: "l", typ: tar.TypeSymlink, linkname: "../victim"}},
		"symlink deep":            {{name: "a/b/l", typ: tar.TypeSymlink, linkname: "../../../victim"}},
		"symlink empty":           {{name: "l", typ: tar.TypeSymlink, linkname: ""}},
		"symlink chain":           {{name: "a", typ: tar.TypeSymlink, linkname: "."}, {name: "b", typ: tar.TypeSymlink, linkname: "a/../../victim"}},
		"symlink via parent link": {{name: "p", typ: tar.TypeSymlink, linkname: "."}, {name: "p/l", typ: tar.TypeSymlink, linkname: ".."}},
		"symlink down and up":     {{name: "p/q", typ: tar.TypeSymlink, linkname: ".."}, {name: "p/l", typ: tar.TypeSymlink, linkname: "q/../.."}},
		"symlink absolute dotdot": {{name: "a", typ: tar.TypeSymlink, linkname: "."}, {name: "l", typ: tar.TypeSymlink, linkname: "DEST/a/../victim"}},
		"hard link":               {{name: "h", typ: tar.TypeLink, linkname: "../victim"}},
		"hard link inside":        {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "h", typ: tar.TypeLink, linkname: "f"}},
		"char device":             {{name: "null", typ: tar.TypeChar, mode: 0o666}},
		"block device":            {{name: "sda", typ: tar.TypeBlock, mode: 0o666}},
		"fifo":                    {{name: "fifo", typ: tar.TypeFifo, mode: 0o666}},
		"dot with file":           {{name: ".", typ: tar.TypeReg, body: "x"}},
		"empty name":              {{name: "", typ: tar.TypeReg, body: "x"}},
		"dotdot after good":       {{name: "ok", typ: tar.TypeReg, body: "fine"}, {name: "../victim", typ: tar.TypeReg, body: "pwned"}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			outer, dest := sandboxDirs(t)
			before := tree(t, outer)
			for i := range entries {
				entries[i].linkname = strings.ReplaceAll(entries[i].linkname, "DEST", dest)
			}
			err := extract(context.Background(), dest, bytes.NewReader(mkTar(t, entries...)))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidArchive)
			assertLinksInside(t, dest)
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "class of %v", err)
			b, rerr := os.ReadFile(filepath.Join(outer, "victim"))
			require.NoError(t, rerr)
			assert.Equal(t, "original", string(b))
			for _, p := range tree(t, outer) {
				if p != "dest" && !hasPrefixPath(p, "dest") {
					assert.Contains(t, before, p, "%s appeared outside the destination", p)
				}
			}
		})
	}
}

// assertLinksInside fails for a symbolic link under dest that resolves
// outside it: one left behind is a way out for whoever follows it later.
func assertLinksInside(t *testing.T, dest string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dest)
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		if to, err := filepath.EvalSymlinks(p); err == nil {
			assert.True(t, within(real, to), "link %s resolves to %s, outside %s", p, to, real)
		}
		return nil
	}))
}

func hasPrefixPath(p, dir string) bool {
	return len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == filepath.Separator
}

func TestExtractRefusesExistingSymlinkOut(t *testing.T) {
	outer, dest := sandboxDirs(t)
	// A link already in the destination that leads outside it.
	require.NoError(t, os.Symlink(outer, filepath.Join(dest, "out")))
	err := extract(context.Background(), dest, bytes.NewReader(mkTar(t,
		hdr{name: "out/victim", typ: tar.TypeReg, mode: 0o644, body: "pwned"})))
	require.ErrorIs(t, err, ErrInvalidArchive)
	b, err := os.ReadFile(filepath.Join(outer, "victim"))
	require.NoError(t, err)
	assert.Equal(t, "original", string(b))
}

func TestExtractReplacesSymlinkInsteadOfFollowing(t *testing.T) {
	outer, dest := sandboxDirs(t)
	// A file entry whose target is a link (pointing outside): the link is
	// replaced, the victim untouched.
	require.NoError(t, os.Symlink(filepath.Join(outer, "victim"), filepath.Join(dest, "f")))
	require.NoError(t, extract(context.Background(), dest, bytes.NewReader(mkTar(t,
		hdr{name: "f", typ: tar.TypeReg, mode: 0o600, body: "new"}))))
	b, err := os.ReadFile(filepath.Join(outer, "victim"))
	require.NoError(t, err)
	assert.Equal(t, "original", string(b))
	fi, err := os.Lstat(filepath.Join(dest, "f"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestExtractModesAndLinks(t *testing.T) {
	_, dest := sandboxDirs(t)
	data := mkTar(t,
		hdr{name: "./", typ: tar.TypeDir, mode: 0o777}, // the destination itself: ignored
		hdr{name: "ro/", typ: tar.TypeDir, mode: 0o500},
		hdr{name: "ro/inside", typ: tar.TypeReg, mode: 0o400, body: "read only"},
		hdr{name: "implicit/parent/file", typ: tar.TypeReg, mode: 0o640, body: "deep"},
		hdr{name: "suid", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n"},
		hdr{name: "inner", typ: tar.TypeSymlink, linkname: "implicit/parent"},
		hdr{name: "inner/through-link", typ: tar.TypeReg, mode: 0o644, body: "via link"},
		hdr{name: "abs-inside", typ: tar.TypeSymlink, linkname: filepath.Join(dest, "suid")},
		hdr{name: "pax", typ: tar.TypeXGlobalHeader},
	)
	require.NoError(t, extract(context.Background(), dest, bytes.NewReader(data)))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dest, "ro"), 0o700) })

	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(filepath.Join(dest, p))
		require.NoError(t, err, p)
		return fi.Mode()
	}
	assert.Equal(t, os.FileMode(0o755), mode(".").Perm(), "destination mode untouched")
	assert.Equal(t, os.ModeDir|0o500, mode("ro"))
	assert.Equal(t, os.FileMode(0o400), mode("ro/inside"))
	assert.Equal(t, os.FileMode(0o640), mode("implicit/parent/file"))
	assert.Equal(t, os.FileMode(0o755), mode("suid"), "setuid is dropped")
	b, err := os.ReadFile(filepath.Join(dest, "implicit/parent/through-link"))
	require.NoError(t, err)
	assert.Equal(t, "via link", string(b))
	l, err := os.Readlink(filepath.Join(dest, "abs-inside"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dest, "suid"), l)
	fi, err := os.Stat(filepath.Join(dest, "ro/inside"))
	require.NoError(t, err)
	assert.True(t, fi.ModTime().Equal(time.Unix(1_600_000_000, 0)), "mtime kept")
}

func TestExtractArgumentsAndCorruption(t *testing.T) {
	_, dest := sandboxDirs(t)
	err := extract(context.Background(), "relative/dir", bytes.NewReader(mkTar(t)))
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "relative destination: %v", err)

	err = extract(context.Background(), filepath.Join(dest, "missing"), bytes.NewReader(mkTar(t)))
	assert.Error(t, err, "missing destination")

	good := mkTar(t, hdr{name: "f", typ: tar.TypeReg, mode: 0o644, body: "0123456789"})
	err = extract(context.Background(), dest, bytes.NewReader(good[:515])) // cut inside the body
	assert.ErrorIs(t, err, ErrInvalidArchive)

	err = extract(context.Background(), dest, bytes.NewReader(bytes.Repeat([]byte{0xff}, 1024)))
	assert.ErrorIs(t, err, ErrInvalidArchive)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = extract(ctx, dest, bytes.NewReader(good))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestArchiveRoundTrip(t *testing.T) {
	_, dest := sandboxDirs(t)
	data := mkTar(t,
		hdr{name: "tree/", typ: tar.TypeDir, mode: 0o700},
		hdr{name: "tree/a", typ: tar.TypeReg, mode: 0o600, body: "a"},
		hdr{name: "tree/l", typ: tar.TypeSymlink, linkname: "a"},
	)
	require.NoError(t, extract(context.Background(), dest, bytes.NewReader(data)))
	var buf bytes.Buffer
	require.NoError(t, archive(context.Background(), filepath.Join(dest, "tree"), &buf))
	tr := tar.NewReader(&buf)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
	}
	assert.Equal(t, []string{"tree/", "tree/a", "tree/l"}, names)
}

// FuzzExtract feeds arbitrary archives to extract: it must not panic and
// must never create anything outside the destination.
func FuzzExtract(f *testing.F) {
	f.Add(mkTar(f, hdr{name: "../x", typ: tar.TypeReg, body: "x"}))
	f.Add(mkTar(f, hdr{name: "l", typ: tar.TypeSymlink, linkname: ".."}, hdr{name: "l/x", typ: tar.TypeReg, body: "x"}))
	f.Add(mkTar(f, hdr{name: "d/", typ: tar.TypeDir, mode: 0o755}, hdr{name: "d/f", typ: tar.TypeReg, mode: 0o644, body: "x"}))
	f.Add(mkTar(f, hdr{name: "a", typ: tar.TypeSymlink, linkname: "."}, hdr{name: "a/a/a/f", typ: tar.TypeReg, body: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		outer, dest := sandboxDirs(t)
		_ = extract(context.Background(), dest, bytes.NewReader(data))
		_ = filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				_ = os.Chmod(p, 0o700) // let TempDir cleanup remove read-only dirs
			}
			return nil
		})
		entries, err := os.ReadDir(outer)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		assert.ElementsMatch(t, []string{"dest", "victim"}, names)
		b, err := os.ReadFile(filepath.Join(outer, "victim"))
		require.NoError(t, err)
		assert.Equal(t, "original", string(b))
	})
}
