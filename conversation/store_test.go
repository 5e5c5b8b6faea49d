package conversation

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func archiveOf(t *testing.T, files ...File) []byte {
	t.Helper()
	b, err := WriteFiles(files)
	require.NoError(t, err)
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{7}, 32)} {
		s, err := NewFileStore(t.TempDir(), key)
		require.NoError(t, err)
		ctx := context.Background()
		files := []File{{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte(`{"cwd":"/workspace"}`)},
			{Path: ".claude/projects/-workspace/c1/subagents/a.jsonl", Content: []byte("x")}}
		m, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(archiveOf(t, files...)))
		require.NoError(t, err)
		assert.Len(t, m.SHA256, 64)
		assert.Equal(t, key != nil, m.Encrypted)

		got, rc, err := s.Load(ctx, "c1")
		require.NoError(t, err)
		assert.Equal(t, "claude", got.Agent)
		back, err := ReadFiles(rc)
		require.NoError(t, err)
		require.Len(t, back, 2)
		assert.Equal(t, files[0].Path, back[0].Path)
		assert.Equal(t, files[0].Content, back[0].Content)

		_, err = s.Save(ctx, Manifest{ID: "c2", Agent: "claude", Parent: "c1"}, bytes.NewReader(archiveOf(t, files[0])))
		require.NoError(t, err)
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "c2", list[0].ID, "newest first")
		assert.Equal(t, "c1", list[0].Parent)

		require.NoError(t, s.Delete(ctx, "c2"))
		require.NoError(t, s.Delete(ctx, "c2"), "deleting twice is fine")
		_, err = s.Stat(ctx, "c2")
		assert.ErrorIs(t, err, ErrNotFound)
		assert.Equal(t, outposterr.Session, outposterr.ClassOf(err))

		entries, _ := os.ReadDir(s.Dir())
		for _, e := range entries {
			info, _ := e.Info()
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
		}
	}
}

func TestTamperedAndWrongKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := bytes.Repeat([]byte{1}, 32)
	s, _ := NewFileStore(dir, key)
	_, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude"}, bytes.NewReader(archiveOf(t, File{Path: "a", Content: []byte("secret transcript")})))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "secret transcript", "encrypted at rest")

	wrong, _ := NewFileStore(dir, bytes.Repeat([]byte{2}, 32))
	_, _, err = wrong.Load(ctx, "c1")
	require.Error(t, err)
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "wrong key")

	nokey, _ := NewFileStore(dir, nil)
	_, _, err = nokey.Load(ctx, "c1")
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err))

	raw[len(raw)-1] ^= 0xff
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c1.tar.zst"), raw, 0o600))
	_, rc, err := s.Load(ctx, "c1")
	require.Error(t, err)
	assert.Nil(t, rc)
	assert.Contains(t, err.Error(), "digest mismatch")

	_, err = NewFileStore(dir, []byte("short"))
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
}

func TestInvalidIDs(t *testing.T) {
	s, _ := NewFileStore(t.TempDir(), nil)
	for _, id := range []string{"", "../x", "a/b", "-flag", ".hidden", "a b", string(make([]byte, 200))} {
		_, err := s.Save(context.Background(), Manifest{ID: id}, bytes.NewReader(nil))
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%q", id)
		_, _, err = s.Load(context.Background(), id)
		assert.Error(t, err)
		assert.Error(t, s.Delete(context.Background(), id))
	}
	_, err := s.Save(context.Background(), Manifest{ID: "ok", Parent: "../p"}, bytes.NewReader(nil))
	assert.Error(t, err)
}

func TestReadFilesRefusesUnsafeArchives(t *testing.T) {
	mk := func(h *tar.Header, body string) io.Reader {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		h.Size = int64(len(body))
		require.NoError(t, tw.WriteHeader(h))
		_, _ = tw.Write([]byte(body))
		require.NoError(t, tw.Close())
		return &buf
	}
	for name, h := range map[string]*tar.Header{
		"traversal": {Name: "../../etc/passwd", Typeflag: tar.TypeReg, Mode: 0o600},
		"absolute":  {Name: "/etc/passwd", Typeflag: tar.TypeReg, Mode: 0o600},
		"symlink":   {Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		"device":    {Name: "dev", Typeflag: tar.TypeChar},
	} {
		_, err := ReadFiles(mk(h, ""))
		require.Error(t, err, name)
		assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), name)
	}
	_, err := WriteFiles([]File{{Path: "../x"}})
	assert.Error(t, err)
}

func FuzzReadFiles(f *testing.F) {
	b, _ := WriteFiles([]File{{Path: "a/b.jsonl", Content: []byte("{}")}})
	f.Add(b)
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := ReadFiles(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, fl := range files {
			if !SafePath(fl.Path) {
				t.Fatalf("unsafe path accepted: %q", fl.Path)
			}
		}
	})
}
