package leasekit

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestCheckEntry(t *testing.T) {
	ok := []tar.Header{
		{Name: "a", Typeflag: tar.TypeReg},
		{Name: "./a/b/", Typeflag: tar.TypeDir},
		{Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "../b"},
		{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"},
	}
	for _, h := range ok {
		assert.NoError(t, CheckEntry(&h), h.Name)
	}
	bad := []tar.Header{
		{Name: "/abs", Typeflag: tar.TypeReg},
		{Name: "", Typeflag: tar.TypeReg},
		{Name: "../up", Typeflag: tar.TypeReg},
		{Name: "a/../../up", Typeflag: tar.TypeReg},
		{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		{Name: "h", Typeflag: tar.TypeLink, Linkname: "../x"},
		{Name: "dev", Typeflag: tar.TypeChar},
		{Name: "fifo", Typeflag: tar.TypeFifo},
	}
	for _, h := range bad {
		err := CheckEntry(&h)
		assert.ErrorIs(t, err, ErrUnsafeArchive, "%q", h.Name)
	}
}

func TestCheckSandboxPath(t *testing.T) {
	assert.NoError(t, CheckSandboxPath("/home/agent/x"))
	for _, bad := range []string{"", "/", "rel", "/a/../b", "/a/", "/a//b", "/a\x00b"} {
		err := CheckSandboxPath(bad)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%q: %v", bad, err)
	}
}

func TestSafeTar(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "ok", Typeflag: tar.TypeReg, Size: 2, Uid: 5, Uname: "x"}))
	_, _ = tw.Write([]byte("hi"))
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../bad", Typeflag: tar.TypeReg}))
	require.NoError(t, tw.Close())
	var out bytes.Buffer
	err := SafeTar(&out, bytes.NewReader(in.Bytes()))
	require.ErrorIs(t, err, ErrUnsafeArchive)
	h, err := tar.NewReader(&out).Next()
	require.NoError(t, err)
	assert.Equal(t, "ok", h.Name)
	assert.Zero(t, h.Uid, "owners are dropped")
	assert.Empty(t, h.Uname)
}

func TestPipe(t *testing.T) {
	p := NewPipe()
	_, err := p.Write([]byte("abc"))
	require.NoError(t, err)
	p.CloseWrite()
	b, err := io.ReadAll(p)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(b))
	_, err = p.Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe)

	// A write larger than the buffer goes through while a reader drains it.
	p = NewPipe()
	big := bytes.Repeat([]byte("x"), PipeBuffer+10)
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write(big)
		p.CloseWrite()
		wrote <- err
	}()
	got, err := io.ReadAll(p)
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	assert.Len(t, got, len(big))

	// Close unblocks a blocked writer and readers.
	p = NewPipe()
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, PipeBuffer+1))
		done <- err
	}()
	p.Close()
	assert.True(t, errors.Is(<-done, io.ErrClosedPipe))
	n, err := p.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF)
}

func TestTailOfKeepsTheEndOnceTheStreamEnds(t *testing.T) {
	pr, pw := io.Pipe()
	tail, done := TailOf(pr, 4)
	_, err := pw.Write([]byte("abcdef"))
	require.NoError(t, err)
	select {
	case <-done:
		t.Fatal("done closed before the stream ended")
	default:
	}
	require.NoError(t, pw.Close())
	<-done
	assert.Equal(t, "cdef", string(tail.Bytes()))
}

func TestTailBuffer(t *testing.T) {
	tb := &TailBuffer{Max: 4}
	_, _ = tb.Write([]byte("abcdef"))
	assert.Equal(t, "cdef", string(tb.Bytes()))
}

func TestSignals(t *testing.T) {
	assert.Equal(t, "SIGKILL", LinuxSignalName(9))
	assert.Empty(t, LinuxSignalName(0))
	assert.Empty(t, LinuxSignalName(64))
	assert.Equal(t, "SIGTERM", HostSignalName(syscall.SIGTERM))
}

func TestWorkspaceDir(t *testing.T) {
	got, err := WorkspaceDir("")
	require.NoError(t, err)
	assert.Empty(t, got)
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.Mkdir("ws", 0o700))
	got, err = WorkspaceDir("ws")
	require.NoError(t, err)
	assert.Equal(t, dir+"/ws", got)
	require.NoError(t, os.WriteFile("file", nil, 0o600))
	_, err = WorkspaceDir("file")
	require.ErrorContains(t, err, "is not a directory")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	_, err = WorkspaceDir("missing")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))

	got, fi, err := StatWorkspace("ws")
	require.NoError(t, err)
	assert.Equal(t, dir+"/ws", got)
	assert.True(t, fi.IsDir(), "the directory's own FileInfo")
	_, fi, err = StatWorkspace("")
	require.NoError(t, err)
	assert.Nil(t, fi, "no workspace, no FileInfo")
}
