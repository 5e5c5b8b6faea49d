package bootstrap

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestEnsureArchiveInstalls(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	url := srv.put("/antigravity-cli/1.2.12-1/linux-x64/cli_linux_x64.tar.gz", archive)
	var progress []Progress
	var mu sync.Mutex
	b := newBootstrapper(t, Options{
		Catalog: agyCatalog(t, url, sri(archive)),
		Now:     func() time.Time { return time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) },
		Progress: func(p Progress) {
			mu.Lock()
			progress = append(progress, p)
			mu.Unlock()
		},
	})
	e, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	assert.Equal(t, "agy", e.Command)
	assert.Equal(t, "1.2.12", e.Version)
	assert.Equal(t, filepath.Join(e.Dir, "agy"), e.BinPath)
	out, err := exec.Command(e.BinPath, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "antigravity 1.2.12\n", string(out))
	assert.NoFileExists(t, filepath.Join(e.Dir, "README.md"))

	// The manifest records the pin and every file.
	data, err := os.ReadFile(filepath.Join(filepath.Dir(e.Dir), "manifest.json"))
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, sri(archive), m.Integrity)
	assert.Equal(t, url, m.Source)
	assert.Equal(t, int64(len(archive)), m.Size)
	assert.Equal(t, HostPlatform(), m.Platform)
	assert.Equal(t, []File{{Path: "agy", Type: "file", Mode: 0o755, Size: int64(len(fakeCLI("antigravity 1.2.12")))}}, m.Files)
	assert.Equal(t, time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), m.Installed)

	// Progress went download → verify → extract → done, ending complete.
	mu.Lock()
	require.NotEmpty(t, progress)
	last := progress[len(progress)-1]
	mu.Unlock()
	assert.Equal(t, "done", last.Phase)
	assert.Equal(t, int64(len(archive)), last.Done)

	// A second Ensure is a cache hit: no request.
	e2, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	assert.Equal(t, e.BinPath, e2.BinPath)
	assert.Equal(t, int64(1), srv.count("/antigravity-cli/1.2.12-1/linux-x64/cli_linux_x64.tar.gz"))

	// The same cache, read by a new Bootstrapper (another process), is trusted.
	b2 := newBootstrapper(t, Options{CacheDir: b.opts.CacheDir, Catalog: b.Catalog(), Offline: true})
	_, err = b2.Ensure(context.Background(), "agy")
	require.NoError(t, err)

	// The host sandbox runs the copy.
	sb := hostSandbox(t)
	bin, err := b.Install(context.Background(), sb, e, "")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(sb.Home(), ".outpost", "cli", "agy", "1.2.12", "agy"), bin)
	line, err := b.Check(context.Background(), sb, "agy", bin)
	require.NoError(t, err)
	assert.Equal(t, "antigravity 1.2.12", line)
}

func TestEnsureAgyWithoutPin(t *testing.T) {
	b := newBootstrapper(t, Options{})
	_, err := b.Ensure(context.Background(), "agy")
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
	assert.Contains(t, err.Error(), "no pinned download")
	assert.Contains(t, err.Error(), "sha512")
	assert.Contains(t, err.Error(), "Catalog.Override")
	assert.Equal(t, "agy", outposterr.DetailsOf(err).Agent)
	assertCacheClean(t, b.opts.CacheDir)

	_, err = b.Ensure(context.Background(), "nope")
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}

// TestEnsureRefuses serves bad archives: each is a bootstrap error that
// leaves nothing in the cache or the sandbox.
func TestEnsureRefuses(t *testing.T) {
	good := agyArchive(t, "1.2.12")
	tampered := agyArchive(t, "6.6.6")
	tests := []struct {
		name    string
		serve   []byte
		pin     string
		lim     Limits
		want    []string
		errIs   error
		process bool
	}{
		{name: "tampered archive", serve: tampered, pin: sri(good), errIs: ErrIntegrity,
			want: []string{"expected " + sri(good), "got " + sri(tampered), "nothing was installed"}},
		{name: "wrong digest", serve: good, pin: sri([]byte("something else")), errIs: ErrIntegrity,
			want: []string{"expected " + sri([]byte("something else")), "got " + sri(good)}},
		{name: "traversal entry", serve: gz(t, makeTar(t, reg("antigravity", "x", 0o755), reg("../../evil", "x", 0o644))), errIs: ErrUnsafeArchive,
			want: []string{".. component"}},
		{name: "escaping symlink", serve: gz(t, makeTar(t, ent{name: "antigravity", typ: tar.TypeSymlink, link: "../../../bin/sh"})), errIs: ErrUnsafeArchive,
			want: []string{"points up"}},
		{name: "absolute symlink", serve: gz(t, makeTar(t, ent{name: "antigravity", typ: tar.TypeSymlink, link: "/bin/sh"})), errIs: ErrUnsafeArchive,
			want: []string{"points to"}},
		{name: "oversized archive", serve: good, lim: Limits{MaxDownload: 100}, errIs: ErrUnsafeArchive,
			want: []string{"over the 100 byte limit"}},
		{name: "oversized member", serve: gz(t, makeTar(t, reg("antigravity", strings.Repeat("x", 5000), 0o755))), lim: Limits{MaxEntry: 4096}, errIs: ErrUnsafeArchive,
			want: []string{"over the 4096 byte limit"}},
		{name: "member missing", serve: gz(t, makeTar(t, reg("bin/antigravity", "x", 0o755))),
			want: []string{"no executable regular file for agy"}},
		{name: "member not executable", serve: gz(t, makeTar(t, reg("antigravity", "x", 0o644))),
			want: []string{"no executable regular file for agy"}},
		{name: "not found", want: []string{"404"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			url := srv.URL + "/cli_linux_x64.tar.gz"
			if tc.serve != nil {
				url = srv.put("/cli_linux_x64.tar.gz", tc.serve)
			}
			pin := tc.pin
			if pin == "" {
				pin = sri(tc.serve)
			}
			b := newBootstrapper(t, Options{Catalog: agyCatalog(t, url, pin), Limits: tc.lim})
			sb := hostSandbox(t)
			e, err := b.Ensure(context.Background(), "agy")
			require.Error(t, err)
			assert.Nil(t, e)
			assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
			assert.Equal(t, outposterr.Bootstrap, outposterr.ClassOf(err))
			if tc.errIs != nil {
				require.ErrorIs(t, err, tc.errIs)
			}
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assertCacheClean(t, b.opts.CacheDir)
			left, rerr := os.ReadDir(sb.Home())
			require.NoError(t, rerr)
			assert.Empty(t, left, "sandbox home")
		})
	}
}

func TestEnsureConcurrent(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	p := "/cli_linux_x64.tar.gz"
	url := srv.put(p, archive)
	srv.mu.Lock()
	srv.delay = 50 * time.Millisecond // keep the first download in flight while the others arrive
	srv.mu.Unlock()
	cat := agyCatalog(t, url, sri(archive))
	cache := t.TempDir()
	// Two Bootstrappers on one cache stand for two processes: they meet on
	// the file lock, not the in-process semaphore.
	bs := []*Bootstrapper{newBootstrapper(t, Options{CacheDir: cache, Catalog: cat}), newBootstrapper(t, Options{CacheDir: cache, Catalog: cat})}
	const n = 16
	entries := make([]*Entry, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { entries[i], errs[i] = bs[i%2].Ensure(context.Background(), "agy") })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, entries[0].BinPath, entries[i].BinPath)
	}
	assert.Equal(t, int64(1), srv.count(p), "downloads")
	tmp, err := os.ReadDir(filepath.Join(cache, "tmp"))
	require.NoError(t, err)
	assert.Empty(t, tmp)
}

func TestLockFileExcludes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lockFile(context.Background(), p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = lockFile(ctx, p)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), p)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("lock not handed over")
	}
}

func TestEnsureReplacesDamagedEntry(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	url := srv.put("/a.tar.gz", archive)
	b := newBootstrapper(t, Options{Catalog: agyCatalog(t, url, sri(archive))})
	e, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.BinPath, []byte("#!/bin/sh\necho evil\n"), 0o755))
	e2, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	out, err := exec.Command(e2.BinPath, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "antigravity 1.2.12\n", string(out))
	assert.Equal(t, int64(2), srv.count("/a.tar.gz"))

	// A pin change is a different entry, never the old one.
	other := agyArchive(t, "1.2.13")
	url2 := srv.put("/b.tar.gz", other)
	cat, err := b.Catalog().Override("agy", Pin{Version: "1.2.13", URL: url2, Integrity: sri(other)})
	require.NoError(t, err)
	b3 := newBootstrapper(t, Options{CacheDir: b.opts.CacheDir, Catalog: cat})
	e3, err := b3.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	assert.NotEqual(t, e2.Dir, e3.Dir)
}

// npmFixture serves a fake platform package the way an npm registry does.
func npmFixture(t *testing.T, srv *server) (Catalog, []byte) {
	t.Helper()
	tgz := gz(t, makeTar(t,
		reg("package/package.json", `{"name":"@fake/tool-linux-x64"}`, 0o644),
		reg("package/vendor/x86_64-unknown-linux-musl/bin/tool", fakeCLI("tool-cli 3.1.4"), 0o755),
		reg("package/vendor/x86_64-unknown-linux-musl/path/rg", fakeCLI("rg"), 0o755),
	))
	srv.put("/@fake/tool/-/tool-3.1.4-linux-x64.tgz", tgz)
	row := Row{
		Name: "tool", Version: "3.1.4", Bin: "bin/tool", VersionLine: "tool-cli %s",
		Members: []Member{{From: "package/vendor/x86_64-unknown-linux-musl/", To: ""}},
		Sources: map[Platform]Source{HostPlatform(): {Package: "@fake/tool", VersionSuffix: "-linux-x64", Integrity: sri(tgz)}},
	}
	cat, err := DefaultCatalog().With(row)
	require.NoError(t, err)
	return cat, tgz
}

func TestEnsureNPM(t *testing.T) {
	srv := newServer(t)
	cat, _ := npmFixture(t, srv)
	b := newBootstrapper(t, Options{Catalog: cat, Registry: func() (Registry, error) {
		return Registry{Scopes: map[string]string{"@fake": srv.URL + "/"}}, nil
	}})
	e, err := b.Ensure(context.Background(), "tool")
	require.NoError(t, err)
	assert.Equal(t, srv.URL+"/@fake/tool/-/tool-3.1.4-linux-x64.tgz", e.Manifest.Source)
	assert.FileExists(t, filepath.Join(e.Dir, "path", "rg"))
	assert.Equal(t, "/opt/outpost/cli/tool/3.1.4/bin", e.SandboxBinDir())
	m := e.Mount()
	assert.Equal(t, e.Dir, m.Source)
	assert.Equal(t, "/opt/outpost/cli/tool/3.1.4", m.Target)
	assert.True(t, m.ReadOnly)
}

func TestEnsureNPMMetadataFallback(t *testing.T) {
	srv := newServer(t)
	cat, tgz := npmFixture(t, srv)
	// The registry keeps tarballs elsewhere; its version document says where.
	alt := srv.put("/files/tool.tgz", tgz)
	srv.mu.Lock()
	delete(srv.files, "/@fake/tool/-/tool-3.1.4-linux-x64.tgz")
	srv.mu.Unlock()
	doc := fmt.Sprintf(`{"dist":{"tarball":%q,"integrity":%q}}`, alt, sri(tgz))
	srv.put("/@fake%2ftool/3.1.4-linux-x64", []byte(doc))
	b := newBootstrapper(t, Options{Catalog: cat, Registry: func() (Registry, error) { return Registry{URL: srv.URL + "/"}, nil }})
	e, err := b.Ensure(context.Background(), "tool")
	require.NoError(t, err)
	assert.Equal(t, alt, e.Manifest.Source)

	// Metadata that disagrees with the pin is refused.
	srv.put("/@fake%2ftool/3.1.4-linux-x64", []byte(fmt.Sprintf(`{"dist":{"tarball":%q,"integrity":%q}}`, alt, sri([]byte("x")))))
	b2 := newBootstrapper(t, Options{Catalog: cat, Registry: func() (Registry, error) { return Registry{URL: srv.URL + "/"}, nil }})
	_, err = b2.Ensure(context.Background(), "tool")
	require.ErrorIs(t, err, ErrIntegrity)
	assertCacheClean(t, b2.opts.CacheDir)
}

func TestEnsureNoRegistry(t *testing.T) {
	srv := newServer(t)
	cat, _ := npmFixture(t, srv)
	b := newBootstrapper(t, Options{Catalog: cat})
	_, err := b.Ensure(context.Background(), "tool")
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
	assert.Contains(t, err.Error(), "NPM_CONFIG_REGISTRY")

	b = newBootstrapper(t, Options{Catalog: cat, Registry: func() (Registry, error) { return Registry{}, errors.New("broken npmrc") }})
	_, err = b.Ensure(context.Background(), "tool")
	assert.ErrorContains(t, err, "broken npmrc")
}

func TestEnsureMirror(t *testing.T) {
	srv := newServer(t)
	cat, tgz := npmFixture(t, srv)
	srv.Close() // the network is gone
	for _, name := range []string{"tool-3.1.4-linux-x64.tgz", "fake-tool-3.1.4-linux-x64.tgz"} {
		t.Run(name, func(t *testing.T) {
			mirror := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(mirror, name), tgz, 0o644))
			b := newBootstrapper(t, Options{Catalog: cat, Mirror: mirror, Offline: true})
			e, err := b.Ensure(context.Background(), "tool")
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(mirror, name), e.Manifest.Source)
		})
	}
	t.Run("tampered mirror", func(t *testing.T) {
		mirror := t.TempDir()
		bad := append([]byte{}, tgz...)
		bad[len(bad)-10] ^= 1
		require.NoError(t, os.WriteFile(filepath.Join(mirror, "tool-3.1.4-linux-x64.tgz"), bad, 0o644))
		b := newBootstrapper(t, Options{Catalog: cat, Mirror: mirror, Offline: true})
		_, err := b.Ensure(context.Background(), "tool")
		require.ErrorIs(t, err, ErrIntegrity)
		assertCacheClean(t, b.opts.CacheDir)
	})
	t.Run("missing offline", func(t *testing.T) {
		b := newBootstrapper(t, Options{Catalog: cat, Mirror: t.TempDir(), Offline: true})
		_, err := b.Ensure(context.Background(), "tool")
		require.Error(t, err)
		assert.True(t, outposterr.Is(err, outposterr.Bootstrap))
		assert.Contains(t, err.Error(), "downloads are off")
		assertCacheClean(t, b.opts.CacheDir)
	})
}

func TestEnsureStalledDownload(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-release
	})
	t.Cleanup(func() { close(release) })
	b := newBootstrapper(t, Options{Catalog: agyCatalog(t, srv.URL+"/x.tar.gz", sri([]byte("x"))), StallTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := b.Ensure(context.Background(), "agy")
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
	assert.Contains(t, err.Error(), "no data for 200ms")
	assert.Less(t, time.Since(start), 10*time.Second)
	assertCacheClean(t, b.opts.CacheDir)
}

func TestEnsureCancelled(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	b := newBootstrapper(t, Options{Catalog: agyCatalog(t, srv.URL+"/x.tar.gz", sri([]byte("x")))})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := b.Ensure(ctx, "agy")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err))
	assertCacheClean(t, b.opts.CacheDir)
}

func TestEnsureSweepsStaleTemporaries(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	url := srv.put("/a.tar.gz", archive)
	b := newBootstrapper(t, Options{Catalog: agyCatalog(t, url, sri(archive))})
	tmp := filepath.Join(b.opts.CacheDir, "tmp")
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "entry-old", "tree"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "download-old.part"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "download-new.part"), []byte("x"), 0o644))
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(tmp, "entry-old"), old, old))
	require.NoError(t, os.Chtimes(filepath.Join(tmp, "download-old.part"), old, old))
	_, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, "download-new.part", left[0].Name(), "a recent file may belong to a live install")
}
