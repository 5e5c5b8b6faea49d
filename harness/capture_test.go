package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/sandbox"
)

// slowSandbox serves the fake CLI's transcript c1.jsonl as a tar stream
// that yields chunk bytes per gap, or never moves when stuck.
type slowSandbox struct {
	sandbox.Sandbox
	tarball []byte
	chunk   int
	gap     time.Duration
	stuck   bool
}

func (s *slowSandbox) Home() string { return "/home/agent" }

func (s *slowSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	if !strings.HasSuffix(p, "/c1.jsonl") {
		return nil, os.ErrNotExist
	}
	return io.NopCloser(&slowReader{ctx: ctx, s: s, rest: s.tarball}), nil
}

type slowReader struct {
	ctx  context.Context
	s    *slowSandbox
	rest []byte
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.s.stuck {
		<-r.ctx.Done() // a copy that never moves: only the capture's end frees it
		return 0, r.ctx.Err()
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	select {
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	case <-time.After(r.s.gap):
	}
	n := copy(p[:min(len(p), r.s.chunk)], r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func transcriptTar(t *testing.T, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "c1.jsonl", Mode: 0o600, Size: int64(size), Typeflag: tar.TypeReg}))
	_, err := tw.Write(bytes.Repeat([]byte("x"), size))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// TestCaptureBoundedByStallNotByTime: a capture that keeps moving is kept
// even when it takes longer than the stall bound; one that stops moving is
// ended after the stall bound with a warning that says so.
func TestCaptureBoundedByStallNotByTime(t *testing.T) {
	defer func(d time.Duration) { captureStall = d }(captureStall)
	captureStall = time.Second
	exe, err := os.Executable()
	require.NoError(t, err)
	a := fakecli.NewStorage(exe)

	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	// 3 s of copying in 2 ms steps, three times the stall bound.
	sb := &slowSandbox{tarball: transcriptTar(t, 64<<10), gap: 2 * time.Millisecond}
	sb.chunk = len(sb.tarball)/1500 + 1
	res := &Result{Conversation: "c1", Agent: a.Name()}
	start := time.Now()
	captureConversation(context.Background(), a, store, sb, adapters.Input{}, res, nil)
	assert.Greater(t, time.Since(start), captureStall, "the copy took longer than the stall bound")
	assert.Empty(t, res.Warnings)
	m, err := store.Stat(context.Background(), "c1")
	require.NoError(t, err, "a slow but moving capture is stored")
	assert.Equal(t, "c1", m.ID)

	fresh, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	res = &Result{Conversation: "c1", Agent: a.Name()}
	captureConversation(context.Background(), a, fresh, &slowSandbox{stuck: true}, adapters.Input{}, res, nil)
	require.Len(t, res.Warnings, 1)
	assert.Equal(t, "conversation c1 not stored: the copy out of the sandbox stalled (no byte for 1s)", res.Warnings[0])
	_, err = fresh.Stat(context.Background(), "c1")
	assert.Error(t, err, "nothing was stored")
}
