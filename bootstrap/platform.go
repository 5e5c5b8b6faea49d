package bootstrap

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// detectScript prints the kernel name, the machine, and "musl" when the
// musl dynamic loader is present (the way Alpine and other musl systems are
// told apart from glibc ones).
const detectScript = `uname -s; uname -m; for f in /lib/ld-musl-* /lib/libc.musl-*; do if [ -e "$f" ]; then echo musl; break; fi; done`

// DetectPlatform asks the sandbox which platform its binaries must be built
// for (it needs sh and uname there): "linux-x64", "linux-arm64-musl",
// "darwin-arm64", … Use it with [Bootstrapper.EnsureFor] when the sandbox
// image may differ from the host's C library.
func DetectPlatform(ctx context.Context, sb sandbox.Sandbox) (Platform, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", detectScript}})
	if err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "detect sandbox platform")
	}
	defer p.Close()
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&out, io.LimitReader(p.Stdout(), 4096)) })
	wg.Go(func() { _, _ = io.Copy(io.Discard, p.Stderr()) })
	st, err := p.Wait()
	if err == nil {
		wg.Wait()
	}
	if err != nil || !st.Success() {
		return "", outposterr.New(outposterr.Bootstrap, "detect sandbox platform: %s (%v)", st, err)
	}
	return parsePlatform(out.String())
}

// parsePlatform turns the output of detectScript into a Platform.
func parsePlatform(out string) (Platform, error) {
	f := strings.Fields(out)
	if len(f) < 2 {
		return "", outposterr.New(outposterr.Bootstrap, "detect sandbox platform: unexpected output %q", out)
	}
	var os, arch string
	switch strings.ToLower(f[0]) {
	case "linux":
		os = "linux"
	case "darwin":
		os = "darwin"
	default:
		return "", outposterr.New(outposterr.Bootstrap, "detect sandbox platform: unsupported system %q", f[0])
	}
	switch f[1] {
	case "x86_64", "amd64":
		arch = "x64"
	case "aarch64", "arm64":
		arch = "arm64"
	default:
		return "", outposterr.New(outposterr.Bootstrap, "detect sandbox platform: unsupported machine %q", f[1])
	}
	p := os + "-" + arch
	if len(f) > 2 && f[2] == "musl" && os == "linux" {
		p += "-musl"
	}
	return Platform(p), nil
}
