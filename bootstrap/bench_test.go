package bootstrap

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
)

// BenchmarkVerifySHA512 hashes a 64 MiB buffer: the cost of verifying a
// download against its pin.
func BenchmarkVerifySHA512(b *testing.B) {
	buf := make([]byte, 64<<20)
	_, _ = rand.Read(buf)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		h := newHash()
		_, _ = h.Write(buf)
		_ = sumOf(h)
	}
}

// BenchmarkDownloadCopy runs the download loop (stall watchdog, size cap,
// progress, SHA-512 and a file-like sink) over a 64 MiB in-memory body.
func BenchmarkDownloadCopy(b *testing.B) {
	buf := make([]byte, 64<<20)
	_, _ = rand.Read(buf)
	bs, err := New(Options{CacheDir: b.TempDir(), Progress: func(Progress) {}})
	require.NoError(b, err)
	d := download{row: Row{Name: "bench", Version: "1"}}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		h := newHash()
		_, err := bs.copyBody(context.Background(), d, io.MultiWriter(io.Discard, h), bytes.NewReader(buf), int64(len(buf)), Limits{}.withDefaults())
		require.NoError(b, err)
		_ = sumOf(h)
	}
}

// BenchmarkDockerInstall compares ways of getting the cached Claude Code
// binary (373 MB) into a fresh Docker lease. Each iteration acquires a new
// lease with the timer stopped and times only the step named:
//
//   - acquire, acquire-mount: Acquire without and with the read-only cache
//     mount (the mount form's whole install cost is the difference);
//   - raw-copy: CopyIn of a tar holding just the binary (the floor for any
//     copy);
//   - install-copy: Bootstrapper.Install (a --version probe that fails, the
//     copy of the tree, and the --version check);
//   - check: Bootstrapper.Check of the mounted binary (--version alone).
func BenchmarkDockerInstall(b *testing.B) {
	bs, entries := realEntries(b, "claude")
	e := entries["claude"]
	p := dockerProvider(b)
	ctx := context.Background()
	mountSpec := sandbox.Spec{Mounts: []sandbox.Mount{e.Mount()}}

	// lease runs one timed step per iteration in a fresh lease.
	lease := func(b *testing.B, spec sandbox.Spec, step func(sandbox.Sandbox)) {
		for range b.N {
			b.StopTimer()
			sb, err := p.Acquire(ctx, spec)
			require.NoError(b, err)
			b.StartTimer()
			step(sb)
			b.StopTimer()
			require.NoError(b, sb.Release(ctx))
			b.StartTimer()
		}
	}
	b.Run("acquire", func(b *testing.B) {
		for range b.N {
			sb, err := p.Acquire(ctx, sandbox.Spec{})
			require.NoError(b, err)
			b.StopTimer()
			require.NoError(b, sb.Release(ctx))
			b.StartTimer()
		}
	})
	b.Run("acquire-mount", func(b *testing.B) {
		for range b.N {
			sb, err := p.Acquire(ctx, mountSpec)
			require.NoError(b, err)
			b.StopTimer()
			require.NoError(b, sb.Release(ctx))
			b.StartTimer()
		}
	})
	fi, err := os.Stat(e.BinPath)
	require.NoError(b, err)
	b.Run("raw-copy", func(b *testing.B) {
		b.SetBytes(fi.Size())
		lease(b, sandbox.Spec{}, func(sb sandbox.Sandbox) {
			require.NoError(b, sb.CopyIn(ctx, sb.Home(), binaryTar(e.BinPath, fi.Size())))
		})
	})
	// paired alternates a raw `docker exec -i <id> tar -x` of the bare binary
	// and Bootstrapper.Install in fresh leases within each iteration, so both
	// see the same machine load; it reports their mean times and ratio.
	b.Run("paired", func(b *testing.B) {
		if _, err := exec.LookPath("docker"); err != nil {
			b.Skip("no docker command for the raw baseline")
		}
		var raw, inst time.Duration
		for range b.N {
			sb, err := p.Acquire(ctx, sandbox.Spec{})
			require.NoError(b, err)
			start := time.Now()
			cmd := exec.CommandContext(ctx, "docker", "exec", "-i", sb.ID(), "tar", "-x", "-p", "--no-same-owner", "-f", "-", "-C", sb.Home())
			cmd.Stdin = binaryTar(e.BinPath, fi.Size())
			out, err := cmd.CombinedOutput()
			require.NoError(b, err, string(out))
			raw += time.Since(start)
			require.NoError(b, sb.Release(ctx))

			sb, err = p.Acquire(ctx, sandbox.Spec{})
			require.NoError(b, err)
			start = time.Now()
			_, err = bs.Install(ctx, sb, e, "")
			require.NoError(b, err)
			inst += time.Since(start)
			require.NoError(b, sb.Release(ctx))
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(raw.Seconds()/float64(b.N), "raw-s/op")
		b.ReportMetric(inst.Seconds()/float64(b.N), "install-s/op")
		b.ReportMetric(float64(inst)/float64(raw), "install/raw")
	})
	b.Run("install-copy", func(b *testing.B) {
		b.SetBytes(e.Manifest.Files[0].Size)
		lease(b, sandbox.Spec{}, func(sb sandbox.Sandbox) {
			_, err := bs.Install(ctx, sb, e, "")
			require.NoError(b, err)
		})
	})
	b.Run("check", func(b *testing.B) {
		lease(b, mountSpec, func(sb sandbox.Sandbox) {
			_, err := bs.Check(ctx, sb, "claude", e.SandboxBin())
			require.NoError(b, err)
		})
	})
}

// binaryTar streams a tar holding only the file at path, named "claude".
func binaryTar(path string, size int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		f, err := os.Open(path)
		if err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		defer f.Close()
		tw := tar.NewWriter(pw)
		err = tw.WriteHeader(&tar.Header{Name: "claude", Mode: 0o755, Size: size, Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	return pr
}
