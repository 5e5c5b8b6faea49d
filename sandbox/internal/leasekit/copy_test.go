package leasekit

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// fakeTar is the tar a fake kind starts for CopyIn: a Proc whose exit the
// test decides.
type fakeTar struct {
	*Proc
	once   sync.Once
	killed bool
}

func (f *fakeTar) exit(st sandbox.ExitStatus, stderr string) {
	f.once.Do(func() {
		_, _ = f.Err().Write([]byte(stderr))
		f.Out().CloseWrite()
		f.Err().CloseWrite()
		f.SetExit(st, nil)
		f.Finish()
	})
}

func (f *fakeTar) Close() error { return f.CloseWith(func() bool { return false }, func() {}) }

// startFake returns a Start whose tar reads its input when reads is set,
// and exits when it gets SIGKILL; the tar it started is in *started.
func startFake(reads bool, started **fakeTar) Start[*fakeTar] {
	return func(_ context.Context, argv []string, stdin io.Reader) (*fakeTar, error) {
		f := &fakeTar{}
		f.Proc = NewProc("/tmp/outpost-t", "SCRIPT", func(_ context.Context, argv []string) error {
			if argv[5] == "KILL" {
				f.killed = true
				f.exit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, "")
			}
			return nil
		})
		if reads {
			go func() { _, _ = io.Copy(io.Discard, stdin) }()
		}
		*started = f
		return f, nil
	}
}

func archive(t *testing.T, name string) io.Reader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: 2}))
	_, err := tw.Write([]byte("hi"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	return &b
}

// TestCopyInKillsTarAtAnUnsafeEntry: an unsafe entry kills tar before it
// sees the end of its input, and is the caller's (configuration) error.
func TestCopyInKillsTarAtAnUnsafeEntry(t *testing.T) {
	var f *fakeTar
	err := CopyIn(context.Background(), startFake(true, &f), "/workspace", archive(t, "../evil"))
	require.ErrorIs(t, err, ErrUnsafeArchive)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	assert.True(t, f.killed, "tar is killed")
}

// TestCopyInReleasesTheWriterWhenTarEnds: a tar that ends before reading
// its input does not leave CopyIn blocked writing it; its stderr says why.
func TestCopyInReleasesTheWriterWhenTarEnds(t *testing.T) {
	var f *fakeTar
	start := startFake(false, &f)
	ended := func(ctx context.Context, argv []string, stdin io.Reader) (*fakeTar, error) {
		p, err := start(ctx, argv, stdin)
		go f.exit(sandbox.ExitStatus{Code: 2}, "tar: no space left on device")
		return p, err
	}
	err := CopyIn(context.Background(), ended, "/workspace", archive(t, "ok"))
	require.Error(t, err)
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err), "%v", err)
	assert.ErrorContains(t, err, "no space left on device")
}

// TestCopyChecksSandboxPaths: both directions refuse a relative or unclean
// path before starting anything.
func TestCopyChecksSandboxPaths(t *testing.T) {
	var f *fakeTar
	err := CopyIn(context.Background(), startFake(true, &f), "rel", archive(t, "ok"))
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	_, err = CopyOut(context.Background(), startFake(true, &f), "/a/../b")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	assert.Nil(t, f, "nothing started")
}
