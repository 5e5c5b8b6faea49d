package harness

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
)

// zeros is an endless stream without a newline, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// blocked never returns from Read, like a silent pipe.
type blocked struct{}

func (blocked) Read([]byte) (int, error) { select {} }

// TestReplayStops: an endless line and a read that never returns are
// both abandoned when ctx ends; the result is an aborted error.
func TestReplayStops(t *testing.T) {
	for name, r := range map[string]io.Reader{"endless line": zeros{}, "blocked read": blocked{}} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		done := make(chan *Result, 1)
		go func() { done <- Replay(ctx, fakecli.New("fake"), Recording{Stdout: r, At: replayAt}, nil, true) }()
		select {
		case res := <-done:
			require.Error(t, res.Err, name)
			assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(res.Err), name)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: replay did not stop", name)
		}
		cancel()
	}
}

// TestReplayDropsLongLines: a line over MaxLineBytes is dropped and said,
// the lines around it still count.
func TestReplayDropsLongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+10)
	r := replay(t, `{"type":"text","text":"before"}`+"\n"+long+"\n"+`{"type":"finished","ok":true}`+"\n", "", 0)
	require.NoError(t, r.Err)
	assert.Equal(t, 1, r.Counts[adapters.KindText])
	assert.Contains(t, strings.Join(r.Warnings, " "), "longer than 16 MiB")
	r = replay(t, `{"type":"finished","ok":true}`+"\n"+long, "", 0)
	assert.Contains(t, strings.Join(r.Warnings, " "), "longer than 16 MiB", "an unterminated last line too")
}
