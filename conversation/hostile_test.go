package conversation

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/outposterr"
)

// drain reads a loaded archive entry by entry, as restore does.
func drain(rc io.Reader, allow func(string) bool) error {
	ar := NewReader(rc, allow)
	for {
		if _, err := ar.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, ar); err != nil {
			return err
		}
	}
}

func sessionError(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	assert.Equal(t, outposterr.Session, outposterr.ClassOf(err), append([]any{"%v"}, err)...)
}

// plant writes a manifest and an archive straight into the store's
// directory, as an attacker with write access to it could.
func plant(t *testing.T, dir string, m Manifest, archive []byte) {
	t.Helper()
	sum := sha256.Sum256(archive)
	m.SHA256, m.Size = hex.EncodeToString(sum[:]), int64(len(archive))
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.ID+".json"), b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.ID+".tar.zst"), archive, 0o600))
}

func zst(t *testing.T, raw []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}

// TestDowngradeRefused: with a key, a sealed archive replaced by a plain
// one whose manifest says "encrypted": false (with a matching digest) is
// refused, and so is a manifest whose bound fields were edited.
func TestDowngradeRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := bytes.Repeat([]byte{3}, 32)
	s, err := NewFileStore(dir, key)
	require.NoError(t, err)
	tr := archiveOf(t, File{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("genuine")})
	m, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(tr))
	require.NoError(t, err)
	_, rc, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.NoError(t, drain(rc, nil))
	rc.Close()
	sealed, err := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
	require.NoError(t, err)

	// Downgrade: a plain archive, manifest "encrypted": false, digest right.
	evil := archiveOf(t, File{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("attacker's")})
	plain := m
	plain.Encrypted, plain.Format = false, 0
	plant(t, dir, plain, zst(t, evil))
	_, _, err = s.Load(ctx, "c1")
	sessionError(t, err)
	assert.Contains(t, err.Error(), "not encrypted")

	// The same with the current format number.
	plain.Format = Format
	plant(t, dir, plain, zst(t, evil))
	_, _, err = s.Load(ctx, "c1")
	sessionError(t, err)

	// The genuine sealed archive with an edited manifest: every bound field.
	for name, edit := range map[string]func(*Manifest){
		"agent":   func(m *Manifest) { m.Agent = "codex" },
		"parent":  func(m *Manifest) { m.Parent = "other" },
		"cwd":     func(m *Manifest) { m.Cwd = "/elsewhere" },
		"version": func(m *Manifest) { m.CLIVersion = "9.9.9" },
		"failed":  func(m *Manifest) { m.Failed = true },
		"format":  func(m *Manifest) { m.Format = 1 },
	} {
		mm := m
		edit(&mm)
		plant(t, dir, mm, sealed)
		_, _, err = s.Load(ctx, "c1")
		sessionError(t, err, name)
	}
	// Another conversation's sealed archive under this id does not open.
	_, err = s.Save(ctx, Manifest{ID: "c2", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(tr))
	require.NoError(t, err)
	other, err := os.ReadFile(filepath.Join(dir, "c2.tar.zst"))
	require.NoError(t, err)
	plant(t, dir, m, other)
	_, _, err = s.Load(ctx, "c1")
	sessionError(t, err)

	// Untouched, it opens.
	plant(t, dir, m, sealed)
	_, rc, err = s.Load(ctx, "c1")
	require.NoError(t, err)
	files, err := ReadFiles(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "genuine", string(files[0].Content))
}

// TestSealedTruncationRefused: a sealed archive cut at a chunk boundary,
// with its digest fixed up, does not pass for a shorter conversation.
func TestSealedTruncationRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := NewFileStore(dir, bytes.Repeat([]byte{4}, 32))
	big := make([]byte, 3*sealChunk)
	_, _ = io.ReadFull(zeroRand{}, big)
	m, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude"}, bytes.NewReader(archiveOf(t, File{Path: "a", Content: big})))
	require.NoError(t, err)
	sealed, _ := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
	full := sealChunk + 16
	for _, n := range []int{len(sealMagic) + sealPrefix + full, len(sealMagic) + sealPrefix + full - 1, len(sealed) - 1} {
		if n >= len(sealed) {
			continue
		}
		plant(t, dir, m, sealed[:n])
		_, rc, err := s.Load(ctx, "c1")
		if err == nil {
			err = drain(rc, nil)
			rc.Close()
		}
		sessionError(t, err, "cut at %d of %d", n, len(sealed))
	}
}

// zeroRand is a cheap incompressible-enough byte source.
type zeroRand struct{}

func (zeroRand) Read(p []byte) (int, error) {
	x := uint32(2463534242)
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return len(p), nil
}

// bombTar is a tar stream of n files of size bytes each, all zeros.
func bombTar(w io.Writer, n int, size int64) error {
	tw := tar.NewWriter(w)
	zero := make([]byte, 1<<20)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: ".claude/projects/-workspace/c1/f" + string(rune('a'+i)), Mode: 0o600, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		for left := size; left > 0; {
			k := min(left, int64(len(zero)))
			if _, err := tw.Write(zero[:k]); err != nil {
				return err
			}
			left -= k
		}
	}
	return tw.Close()
}

// TestZstdBombBounded: a small archive that decompresses to a gigabyte is
// refused, and reading it costs bounded memory (not the gigabyte, not the
// 256 MiB limit).
func TestZstdBombBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses a gigabyte")
	}
	var bomb bytes.Buffer
	enc, err := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(decoderWindow))
	require.NoError(t, err)
	require.NoError(t, bombTar(enc, 8, 127<<20))
	require.NoError(t, enc.Close())
	t.Logf("bomb: %d bytes compressed", bomb.Len())
	require.Less(t, bomb.Len(), 1<<20)

	dir := t.TempDir()
	plant(t, dir, Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bomb.Bytes())
	s, _ := NewFileStore(dir, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, rc, err := s.Load(context.Background(), "c1")
	require.NoError(t, err)
	err = drain(rc, nil)
	rc.Close()
	runtime.ReadMemStats(&after)
	sessionError(t, err)
	assert.Contains(t, err.Error(), "larger than")
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MiB reading the bomb", alloc>>20)
	assert.Less(t, alloc, uint64(64<<20), "decompression memory is bounded")
}

// TestSaveStreamsBoundedMemory: storing a 200 MiB conversation allocates a
// small fraction of it.
func TestSaveStreamsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{5}, 32)} {
		s, _ := NewFileStore(t.TempDir(), key)
		pr, pw := io.Pipe()
		go func() { _ = pw.CloseWithError(bombTar(pw, 2, 100<<20)) }()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, err := s.Save(context.Background(), Manifest{ID: "big", Agent: "claude"}, pr)
		require.NoError(t, err)
		_, rc, err := s.Load(context.Background(), "big")
		require.NoError(t, err)
		require.NoError(t, drain(rc, nil))
		rc.Close()
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("encrypted=%v: stored %d bytes, allocated %d MiB", m.Encrypted, m.Size, alloc>>20)
		assert.Less(t, alloc, uint64(64<<20))
	}
}

// TestSaveLimits: a conversation over MaxArchiveBytes is refused and the
// stored version stays.
func TestSaveLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 MiB")
	}
	ctx := context.Background()
	s, _ := NewFileStore(t.TempDir(), nil)
	_, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude"}, bytes.NewReader(archiveOf(t, File{Path: "a", Content: []byte("v1")})))
	require.NoError(t, err)
	pr, pw := io.Pipe()
	go func() { _ = pw.CloseWithError(bombTar(pw, 3, 100<<20)) }()
	_, err = s.Save(ctx, Manifest{ID: "c1", Agent: "claude"}, pr)
	sessionError(t, err)
	assert.Contains(t, err.Error(), "larger than")
	_, rc, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	files, err := ReadFiles(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "v1", string(files[0].Content), "the previous version stays")
	entries, _ := os.ReadDir(s.Dir())
	assert.Len(t, entries, 2, "no temporary file left")
}

// TestSaveWithVerifies: the import path — digest, allowlist, no replace.
func TestSaveWithVerifies(t *testing.T) {
	ctx := context.Background()
	s, _ := NewFileStore(t.TempDir(), nil)
	st := claude.New()
	tr := archiveOf(t, File{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("{}")})
	sum := sha256.Sum256(tr)
	good := SaveOptions{Allow: Allowlist(st, "c1", "/workspace"), SHA256: hex.EncodeToString(sum[:]), NoReplace: true}
	m := Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}

	bad := good
	bad.SHA256 = strings.Repeat("0", 64)
	_, err := s.SaveWith(ctx, m, bytes.NewReader(tr), bad)
	sessionError(t, err)
	assert.Contains(t, err.Error(), "sha256 mismatch")

	_, err = s.SaveWith(ctx, m, io.MultiReader(bytes.NewReader(tr), bytes.NewReader(make([]byte, 2<<20))), good)
	sessionError(t, err, "data after the archive")

	hook := archiveOf(t, File{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("{}")},
		File{Path: ".claude/settings.json", Content: []byte(`{"hooks":{}}`)})
	hs := sha256.Sum256(hook)
	withHook := good
	withHook.SHA256 = hex.EncodeToString(hs[:])
	_, err = s.SaveWith(ctx, m, bytes.NewReader(hook), withHook)
	sessionError(t, err)
	assert.Contains(t, err.Error(), "not a conversation file")

	list, _ := s.List(ctx)
	assert.Empty(t, list, "nothing stored by a refused save")

	got, err := s.SaveWith(ctx, m, bytes.NewReader(tr), good)
	require.NoError(t, err)
	assert.Equal(t, []string{".claude/projects/-workspace/c1.jsonl"}, got.Files, "the file list is the archive's")
	_, err = s.SaveWith(ctx, m, bytes.NewReader(tr), good)
	require.ErrorIs(t, err, ErrExists)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	good.NoReplace = false
	_, err = s.SaveWith(ctx, m, bytes.NewReader(tr), good)
	require.NoError(t, err)
}

// TestManifestLimits: an oversized or hostile manifest is refused without
// being echoed.
func TestManifestLimits(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c1.json"), bytes.Repeat([]byte(" "), MaxManifestBytes+1), 0o600))
	s, _ := NewFileStore(dir, nil)
	_, err := s.Stat(context.Background(), "c1")
	sessionError(t, err)

	for _, in := range []string{`{"id":"../x"}`, `{"id":"c1","parent":"a/b"}`, `not json SECRET-MARK`,
		`{"id":"c1","cwd":"relative"}`, `{"id":"c1","cwd":"/a/../b"}`, `{"id":"c1","agent":"../../x"}`, `{"id":"c1","cli_version":"1\n2"}`, `{"id":"c1","files":` + `[` + strings.Repeat(`"a",`, MaxEntries) + `"a"]}`} {
		_, err := ParseManifest([]byte(in))
		sessionError(t, err, in[:min(len(in), 40)])
		assert.NotContains(t, err.Error(), "SECRET-MARK")
	}
	// A link in place of a manifest is not followed.
	outside := filepath.Join(t.TempDir(), "m.json")
	require.NoError(t, os.WriteFile(outside, []byte(`{"id":"c2","agent":"claude"}`), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "c2.json")))
	_, err = s.Stat(context.Background(), "c2")
	sessionError(t, err)
}

// TestAllowed: each adapter's allowlist admits its conversation files and
// nothing else.
func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		st      adapters.Storage
		id, cwd string
		ok      []string
		refused []string
	}{
		{claude.New(), "c1", "/workspace",
			[]string{".claude/projects/-workspace/c1.jsonl", ".claude/projects/-workspace/c1/subagents/a.jsonl", TranscriptPath},
			[]string{".claude/settings.json", ".claude/settings.local.json", ".claude/projects/-workspace/c2.jsonl",
				".claude/projects/-other/c1.jsonl", ".claude/projects/-workspace/c1.jsonlx", ".bashrc", ".profile",
				".claude.json", ".claude/.credentials.json", ".claude/projects/-workspace/../../settings.json", "/etc/passwd"}},
		{codex.New(), "t1", "/workspace",
			[]string{".codex/sessions/2026/01/01/rollout-2026-01-01T00-00-00-t1.jsonl"},
			[]string{".codex/config.toml", ".codex/auth.json", ".codex/sessions/2026/01/01/rollout-x-t2.jsonl",
				".codex/sessions/hooks.sh", ".bashrc"}},
		{copilot.New(), "s1", "/workspace",
			[]string{".copilot/session-state/s1/events.jsonl", ".copilot/session-state/s1/workspace.yaml"},
			[]string{".copilot/config.json", ".copilot/session-state/s2/events.jsonl", ".copilot/session-store.db", ".bashrc"}},
	} {
		for _, p := range tc.ok {
			assert.True(t, Allowed(tc.st, tc.id, tc.cwd, p), "%T %s", tc.st, p)
		}
		for _, p := range tc.refused {
			assert.False(t, Allowed(tc.st, tc.id, tc.cwd, p), "%T %s", tc.st, p)
		}
		assert.False(t, Allowed(tc.st, "../x", tc.cwd, ".bashrc"))
	}
}

// TestReaderRefusals: entry kinds, duplicates and counts.
func TestReaderRefusals(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for range 2 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o600}))
	}
	require.NoError(t, tw.Close())
	_, err := ReadFiles(&buf)
	sessionError(t, err, "duplicate")

	buf.Reset()
	tw = tar.NewWriter(&buf)
	for i := range MaxEntries + 1 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "d" + strings.Repeat("x", i%7) + "/" + string(rune('a'+i%26)) + "/", Typeflag: tar.TypeDir, Mode: 0o700}))
	}
	require.NoError(t, tw.Close())
	_, err = ReadFiles(&buf)
	sessionError(t, err, "too many entries")

	for name, h := range map[string]*tar.Header{
		"hardlink": {Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
		"fifo":     {Name: "p", Typeflag: tar.TypeFifo},
		"huge":     {Name: "big", Typeflag: tar.TypeReg, Size: MaxEntryBytes + 1},
	} {
		buf.Reset()
		tw = tar.NewWriter(&buf)
		require.NoError(t, tw.WriteHeader(h))
		_ = tw.Flush()
		_, err := ReadFiles(bytes.NewReader(buf.Bytes()))
		sessionError(t, err, name)
	}
}

func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace", Parent: "p1", Files: []string{"a"}})
	f.Add(good)
	f.Add([]byte(`{"id":"../x"}`))
	f.Add([]byte(`{"id":"c1","files":null,"usage_total":{"input":1}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if outposterr.ClassOf(err) != outposterr.Session {
				t.Fatalf("error of class %s", outposterr.ClassOf(err))
			}
			return
		}
		if !ValidID(m.ID) || (m.Parent != "" && !ValidID(m.Parent)) {
			t.Fatalf("invalid ids accepted: %q %q", m.ID, m.Parent)
		}
		_ = m.boundData()
	})
}

// FuzzLoad: whatever bytes a store holds as an archive, loading and reading
// it through the allowlist never panics and never yields a file the
// adapter does not declare.
func FuzzLoad(f *testing.F) {
	key := bytes.Repeat([]byte{9}, 32)
	tr, _ := WriteFiles([]File{{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("{}")}})
	f.Add(zstdOrNil(tr), false)
	dir := f.TempDir()
	s, _ := NewFileStore(dir, key)
	if _, err := s.Save(context.Background(), Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(tr)); err == nil {
		sealed, _ := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
		f.Add(sealed, true)
	}
	f.Add([]byte(sealMagic+"0123456789abcdef"), true)
	st := claude.New()
	f.Fuzz(func(t *testing.T, archive []byte, encrypted bool) {
		dir := t.TempDir()
		m := Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace", Format: Format, Encrypted: encrypted}
		sum := sha256.Sum256(archive)
		m.SHA256 = hex.EncodeToString(sum[:])
		b, _ := json.Marshal(m)
		_ = os.WriteFile(filepath.Join(dir, "c1.json"), b, 0o600)
		_ = os.WriteFile(filepath.Join(dir, "c1.tar.zst"), archive, 0o600)
		var k []byte
		if encrypted {
			k = key
		}
		s, _ := NewFileStore(dir, k)
		_, rc, err := s.Load(context.Background(), "c1")
		if err != nil {
			return
		}
		defer rc.Close()
		ar := NewReader(rc, Allowlist(st, "c1", "/workspace"))
		for {
			e, err := ar.Next()
			if err != nil {
				return
			}
			if !Allowed(st, "c1", "/workspace", e.Path) {
				t.Fatalf("refused path yielded: %q", e.Path)
			}
			_, _ = io.Copy(io.Discard, ar)
		}
	})
}

func zstdOrNil(raw []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		return nil
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}

// TestUnusableManifestsRefusedAndKept: a stored manifest that names an
// archive format this version does not know, a size its archive does not
// have, encryption in a store without a key, or itself as its parent is a
// session error when the conversation is used — naming what is wrong — and
// loses nothing: its files stay as they are, it is still listed, the other
// conversations load, and with its manifest repaired it loads again.
func TestUnusableManifestsRefusedAndKept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := NewFileStore(dir, nil)
	require.NoError(t, err)
	tr := archiveOf(t, File{Path: ".claude/projects/-workspace/c1.jsonl", Content: []byte("genuine")})
	m, err := s.Save(ctx, Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(tr))
	require.NoError(t, err)
	_, err = s.Save(ctx, Manifest{ID: "other", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(tr))
	require.NoError(t, err)
	archive, err := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
	require.NoError(t, err)
	genuine, err := os.ReadFile(filepath.Join(dir, "c1.json"))
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		edit func(*Manifest)
		msg  string
	}{
		"unknown format": {func(m *Manifest) { m.Format = 99 }, "archive format 99; this version reads formats up to 2"},
		"wrong size":     {func(m *Manifest) { m.Size += 5 }, "but its manifest says"},
		"encrypted":      {func(m *Manifest) { m.Encrypted = true }, "marked encrypted and this store has no conversation key"},
		"self-parent":    {func(m *Manifest) { m.Parent = m.ID }, "names itself as its parent"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := m
			tc.edit(&bad)
			b, err := json.Marshal(bad)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "c1.json"), b, 0o600))

			_, rc, err := s.Load(ctx, "c1")
			if rc != nil {
				rc.Close()
			}
			sessionError(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), "conversation c1")

			// Nothing lost: the files are untouched, the store lists it
			// and serves the others.
			got, err := os.ReadFile(filepath.Join(dir, "c1.tar.zst"))
			require.NoError(t, err)
			assert.Equal(t, archive, got, "the archive is kept")
			gotM, err := os.ReadFile(filepath.Join(dir, "c1.json"))
			require.NoError(t, err)
			assert.Equal(t, b, gotM, "the manifest is kept")
			list, err := s.List(ctx)
			require.NoError(t, err)
			assert.Len(t, list, 2, "both conversations are listed")
			_, rc, err = s.Load(ctx, "other")
			require.NoError(t, err)
			require.NoError(t, drain(rc, nil))
			rc.Close()

			// Repaired, it loads.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "c1.json"), genuine, 0o600))
			_, rc, err = s.Load(ctx, "c1")
			require.NoError(t, err)
			files, err := ReadFiles(rc)
			rc.Close()
			require.NoError(t, err)
			assert.Equal(t, "genuine", string(files[0].Content))
		})
	}

	// Saving a conversation as its own parent is refused too.
	_, err = s.Save(ctx, Manifest{ID: "c3", Agent: "claude", Parent: "c3", Cwd: "/workspace"}, bytes.NewReader(tr))
	sessionError(t, err)
	assert.Contains(t, err.Error(), "names itself as its parent")
}
