package bootstrap

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// ent is one handcrafted tar entry.
type ent struct {
	name string
	typ  byte
	body string
	mode int64
	link string
	size int64 // header size when it must lie; 0: len(body)
}

func reg(name, body string, mode int64) ent {
	return ent{name: name, typ: tar.TypeReg, body: body, mode: mode}
}

// makeTar builds a tar stream from entries, writing bodies as given even when
// the header claims another size (the writer would refuse, so the size lie is
// only used with an empty body).
func makeTar(t testing.TB, entries ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(0, 0)}
		if e.typ == tar.TypeDir || e.typ == tar.TypeSymlink || e.typ == tar.TypeLink || e.typ == tar.TypeFifo || e.typ == tar.TypeChar {
			h.Size = 0
		}
		if e.size != 0 {
			h.Size = e.size
		}
		require.NoError(t, tw.WriteHeader(h))
		if e.body != "" {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	require.NoError(t, err)
	_, err = zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func sri(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

// fakeCLI is a shell script that prints a --version line.
func fakeCLI(line string) string {
	return "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '" + line + "'; exit 0; fi\necho running\n"
}

// agyArchive is an Antigravity-style archive: a tar.gz whose member
// "antigravity" is the executable, next to files we do not want.
func agyArchive(t testing.TB, version string) []byte {
	t.Helper()
	return gz(t, makeTar(t,
		reg("antigravity", fakeCLI("antigravity "+version), 0o755),
		reg("README.md", "not wanted", 0o644),
	))
}

// server is an npm-style registry and archive host with request counters.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]*atomic.Int64
	delay time.Duration
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{files: map[string][]byte{}, hits: map[string]*atomic.Int64{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.files[r.URL.EscapedPath()]
		c := s.hits[r.URL.EscapedPath()]
		if c == nil {
			c = &atomic.Int64{}
			s.hits[r.URL.EscapedPath()] = c
		}
		delay := s.delay
		s.mu.Unlock()
		c.Add(1)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// put serves body at p (an escaped path) and returns its URL.
func (s *server) put(p string, body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = body
	return s.URL + p
}

func (s *server) count(p string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.hits[p]; c != nil {
		return c.Load()
	}
	return 0
}

// agyCatalog pins the default catalog's Antigravity row to url.
func agyCatalog(t testing.TB, url, integrity string) Catalog {
	t.Helper()
	c, err := DefaultCatalog().Override("agy", Pin{Platform: HostPlatform(), Version: "1.2.12", URL: url, Integrity: integrity})
	require.NoError(t, err)
	return c
}

func newBootstrapper(t testing.TB, opts Options) *Bootstrapper {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	b, err := New(opts)
	require.NoError(t, err)
	return b
}

// assertCacheClean fails when the cache holds anything but directories and
// lock files: no entry, no manifest, no temporary download or staging tree.
func assertCacheClean(t *testing.T, cache string) {
	t.Helper()
	err := filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(cache, p)
		switch {
		case d.IsDir():
			if strings.HasPrefix(rel, "tmp"+string(filepath.Separator)) {
				t.Errorf("staging directory left in the cache: %s", rel)
			}
			if strings.Count(rel, string(filepath.Separator)) >= 3 && strings.HasPrefix(rel, "cli") {
				t.Errorf("cache entry left: %s", rel)
			}
		case strings.HasPrefix(rel, "locks"+string(filepath.Separator)) && strings.HasSuffix(rel, ".lock"):
		default:
			t.Errorf("file left in the cache: %s", rel)
		}
		return nil
	})
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
}

// hostSandbox is a host lease with a minimal PATH, released at the end.
func hostSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	p := host.New(host.Options{Env: map[string]string{"PATH": "/usr/bin:/bin"}, TempDir: t.TempDir()})
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
	return sb
}
