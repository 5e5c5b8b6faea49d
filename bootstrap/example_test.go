package bootstrap_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// Antigravity has no built-in pin: the user pins an archive (URL and
// SHA-512), and the bootstrapper downloads, verifies, caches and installs it.
func Example() {
	// A local stand-in for the vendor's download server.
	archive := antigravityArchive("#!/bin/sh\necho antigravity 1.2.12\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	sum := sha512.Sum512(archive)

	cat, err := bootstrap.DefaultCatalog().Override("agy", bootstrap.Pin{
		Version:   "1.2.12",
		URL:       srv.URL + "/antigravity-cli/1.2.12-1/linux-x64/cli_linux_x64.tar.gz",
		Integrity: "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
	})
	if err != nil {
		panic(err)
	}
	cache, _ := os.MkdirTemp("", "outpost-cache-")
	defer os.RemoveAll(cache)
	b, err := bootstrap.New(bootstrap.Options{CacheDir: cache, Catalog: cat})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	e, err := b.Ensure(ctx, "agy")
	if err != nil {
		panic(err)
	}
	row, _ := cat.Row("agy")
	fmt.Println(e.Command, e.Version, e.Manifest.Integrity == row.Sources[b.Platform()].Integrity)
	fmt.Println("mount:", e.Mount().Target, "PATH entry:", e.SandboxBinDir())

	// Copy it into a (host) sandbox and check the version it reports.
	tmp, _ := os.MkdirTemp("", "outpost-lease-")
	defer os.RemoveAll(tmp)
	sb, err := host.New(host.Options{Env: map[string]string{"PATH": "/usr/bin:/bin"}, TempDir: tmp}).Acquire(ctx, sandbox.Spec{})
	if err != nil {
		panic(err)
	}
	defer sb.Release(ctx)
	bin, err := b.Install(ctx, sb, e, "")
	if err != nil {
		panic(err)
	}
	line, err := b.Check(ctx, sb, "agy", bin)
	fmt.Println(line, err)
	// Output:
	// agy 1.2.12 true
	// mount: /opt/outpost/cli/agy/1.2.12 PATH entry: /opt/outpost/cli/agy/1.2.12
	// antigravity 1.2.12 <nil>
}

// Without a pin, Antigravity is refused with a bootstrap error that says how
// to provide one.
func ExampleBootstrapper_Ensure_unpinned() {
	cache, _ := os.MkdirTemp("", "outpost-cache-")
	defer os.RemoveAll(cache)
	b, _ := bootstrap.New(bootstrap.Options{CacheDir: cache})
	_, err := b.Ensure(context.Background(), "agy")
	fmt.Println(err != nil)
	// Output: true
}

func antigravityArchive(script string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "antigravity", Mode: 0o755, Size: int64(len(script)), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(script))
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}
