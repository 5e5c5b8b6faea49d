package bootstrap

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testMembers = []Member{
	{From: "package/bin/tool", To: "tool"},
	{From: "package/lib/", To: "lib/"},
}

// extractDir extracts into a fresh directory inside a parent that must stay
// otherwise empty, so a breakout would be visible.
func extractDir(t *testing.T, archive []byte, members []Member, lim Limits) (string, []File, error) {
	t.Helper()
	parent := t.TempDir()
	dst := filepath.Join(parent, "tree")
	require.NoError(t, os.Mkdir(dst, 0o755))
	files, err := extract(context.Background(), bytes.NewReader(archive), dst, members, lim)
	names, rerr := os.ReadDir(parent)
	require.NoError(t, rerr)
	require.Len(t, names, 1, "extraction wrote next to its destination")
	return dst, files, err
}

func TestExtractSelectsMembers(t *testing.T) {
	archive := makeTar(t,
		ent{name: "package/", typ: tar.TypeDir, mode: 0o755},
		reg("package/package.json", "{}", 0o644),
		reg("package/bin/tool", "#!/bin/sh\n", 0o4775), // setuid and group write dropped
		ent{name: "package/lib/", typ: tar.TypeDir, mode: 0o700},
		reg("./package/lib/data.txt", "data", 0o600),
		ent{name: "package/lib/sub/", typ: tar.TypeDir, mode: 0o755},
		reg("package/lib/sub/helper", "x", 0o700),
		ent{name: "package/lib/current", typ: tar.TypeSymlink, link: "sub/helper"},
		reg("package/README.md", "no", 0o644),
	)
	for name, data := range map[string][]byte{"tar": archive, "gzip": gz(t, archive), "zstd": zst(t, archive)} {
		t.Run(name, func(t *testing.T) {
			dst, files, err := extractDir(t, data, testMembers, Limits{})
			require.NoError(t, err)
			got := map[string]File{}
			for _, f := range files {
				got[f.Path] = f
			}
			assert.Equal(t, File{Path: "tool", Type: "file", Mode: 0o755, Size: 10}, got["tool"])
			assert.Equal(t, File{Path: "lib/data.txt", Type: "file", Mode: 0o644, Size: 4}, got["lib/data.txt"])
			assert.Equal(t, File{Path: "lib/sub/helper", Type: "file", Mode: 0o755, Size: 1}, got["lib/sub/helper"])
			assert.Equal(t, "sub/helper", got["lib/current"].Link)
			assert.Len(t, files, 5) // tool, data.txt, sub/, sub/helper, current
			fi, err := os.Stat(filepath.Join(dst, "tool"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), fi.Mode())
			assert.NoFileExists(t, filepath.Join(dst, "README.md"))
			assert.NoFileExists(t, filepath.Join(dst, "package.json"))
			b, err := os.ReadFile(filepath.Join(dst, "lib", "current"))
			require.NoError(t, err)
			assert.Equal(t, "x", string(b))
		})
	}
}

// TestExtractBreakouts feeds handcrafted hostile archives. Every one is
// refused with ErrUnsafeArchive and nothing lands outside the destination.
func TestExtractBreakouts(t *testing.T) {
	everything := []Member{{From: "a/", To: ""}}
	small := Limits{MaxEntry: 1 << 10, MaxEntries: 5, MaxUnpacked: 64 << 10}
	tests := []struct {
		name    string
		archive func(t *testing.T) []byte
		members []Member
		lim     Limits
		want    string
	}{
		{"dot-dot", func(t *testing.T) []byte { return makeTar(t, reg("a/../../evil", "x", 0o644)) }, everything, Limits{}, ".. component"},
		{"dot-dot selected", func(t *testing.T) []byte { return makeTar(t, reg("a/../evil", "x", 0o644)) }, []Member{{From: "a/../evil", To: "evil"}}, Limits{}, ".. component"},
		{"absolute", func(t *testing.T) []byte { return makeTar(t, reg("/etc/evil", "x", 0o644)) }, everything, Limits{}, "absolute"},
		{"backslash", func(t *testing.T) []byte { return makeTar(t, reg(`a\..\..\evil`, "x", 0o644)) }, everything, Limits{}, "entry name"},
		{"symlink absolute", func(t *testing.T) []byte {
			return makeTar(t, ent{name: "a/l", typ: tar.TypeSymlink, link: "/etc"}, reg("a/l/evil", "x", 0o644))
		}, everything, Limits{}, "points to"},
		{"symlink up", func(t *testing.T) []byte {
			return makeTar(t, ent{name: "a/l", typ: tar.TypeSymlink, link: "../.."}, reg("a/l/evil", "x", 0o644))
		}, everything, Limits{}, "points up"},
		{"symlink up inside", func(t *testing.T) []byte {
			// lexically inside, but "s" -> "." makes s/.. the parent
			return makeTar(t, ent{name: "a/s", typ: tar.TypeSymlink, link: "."}, ent{name: "a/x", typ: tar.TypeSymlink, link: "s/../x"})
		}, everything, Limits{}, "points up"},
		{"hard link", func(t *testing.T) []byte {
			return makeTar(t, ent{name: "a/h", typ: tar.TypeLink, link: "/etc/passwd"})
		}, everything, Limits{}, "hard link"},
		{"char device", func(t *testing.T) []byte { return makeTar(t, ent{name: "a/null", typ: tar.TypeChar}) }, everything, Limits{}, "special file"},
		{"fifo", func(t *testing.T) []byte { return makeTar(t, ent{name: "a/p", typ: tar.TypeFifo}) }, everything, Limits{}, "special file"},
		{"duplicate", func(t *testing.T) []byte {
			return makeTar(t, reg("a/x", "1", 0o644), reg("a/x", "2", 0o644))
		}, everything, Limits{}, "duplicate"},
		{"symlink then write through", func(t *testing.T) []byte {
			return makeTar(t, ent{name: "a/x", typ: tar.TypeSymlink, link: "y"}, reg("a/x", "2", 0o644))
		}, everything, Limits{}, "duplicate"},
		{"entry too large", func(t *testing.T) []byte {
			return makeTar(t, reg("a/big", strings.Repeat("x", 2<<10), 0o644))
		}, everything, small, "limit"},
		{"too many entries", func(t *testing.T) []byte {
			var es []ent
			for i := range 10 {
				es = append(es, reg("a/f"+string(rune('a'+i)), "x", 0o644))
			}
			return makeTar(t, es...)
		}, everything, small, "more than 5 entries"},
		{"decompression bomb", func(t *testing.T) []byte {
			// a skipped member of 512 KiB of zeros: a few hundred bytes compressed
			return gz(t, makeTar(t, reg("skip/zeros", strings.Repeat("\x00", 512<<10), 0o644)))
		}, everything, Limits{MaxEntry: 1 << 20, MaxUnpacked: 64 << 10}, "unpacks to more than"},
		{"truncated", func(t *testing.T) []byte {
			b := makeTar(t, reg("a/x", strings.Repeat("y", 5000), 0o644))
			return b[:1500]
		}, everything, Limits{}, "unsafe archive"},
		{"corrupt gzip", func(t *testing.T) []byte {
			b := gz(t, makeTar(t, reg("a/x", strings.Repeat("y", 5000), 0o644)))
			b[len(b)/2] ^= 0xff
			return b
		}, everything, Limits{}, "unsafe archive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := extractDir(t, tc.archive(t), tc.members, tc.lim)
			require.ErrorIs(t, err, ErrUnsafeArchive)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzExtract feeds arbitrary bytes (and mutated tars) to extract: it must
// never panic and never write outside its destination.
func FuzzExtract(f *testing.F) {
	f.Add(makeTar(f, reg("package/bin/tool", "x", 0o755), ent{name: "package/lib/l", typ: tar.TypeSymlink, link: "x"}))
	f.Add(gz(f, makeTar(f, reg("package/lib/a", "a", 0o644), reg("package/lib/../x", "a", 0o644))))
	f.Add(zst(f, makeTar(f, ent{name: "package/lib/d/", typ: tar.TypeDir, mode: 0o755}, reg("package/lib/d/f", "f", 0o644))))
	f.Add([]byte{0x1f, 0x8b, 0x08})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "tree")
		require.NoError(t, os.Mkdir(dst, 0o755))
		_, _ = extract(context.Background(), bytes.NewReader(data), dst, testMembers,
			Limits{MaxEntry: 1 << 16, MaxEntries: 64, MaxUnpacked: 1 << 20})
		names, err := os.ReadDir(parent)
		require.NoError(t, err)
		require.Len(t, names, 1)
	})
}

func TestSelectMember(t *testing.T) {
	ms := []Member{{From: "package/claude", To: "claude"}, {From: "package/vendor/x/", To: ""}, {From: "p/d/", To: "lib/"}}
	tests := []struct {
		name  string
		dir   bool
		want  string
		found bool
	}{
		{"package/claude", false, "claude", true},
		{"package/claude", true, "", false},
		{"package/claudex", false, "", false},
		{"package/vendor/x", true, "", false},
		{"package/vendor/x/bin/codex", false, "bin/codex", true},
		{"package/vendor/xy/bin/codex", false, "", false},
		{"p/d/a/b", false, "lib/a/b", true},
		{"package/README.md", false, "", false},
	}
	for _, tc := range tests {
		got, ok := selectMember(tc.name, tc.dir, ms)
		assert.Equal(t, tc.found, ok, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestExtractDirectoryModesIgnoreUmask(t *testing.T) {
	old := syscallUmask(0o077)
	defer syscallUmask(old)
	dst, _, err := extractDir(t, makeTar(t, reg("package/lib/a/b/c", "x", 0o644)), testMembers, Limits{})
	require.NoError(t, err)
	for _, d := range []string{"lib", "lib/a", "lib/a/b"} {
		fi, err := os.Stat(filepath.Join(dst, d))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), d)
	}
}
