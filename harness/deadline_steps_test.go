package harness

import (
	"context"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// stuckStore is a store whose Load does not answer until its context ends
// once stuck is set, as a remote store on a broken link does.
type stuckStore struct {
	conversation.Store
	stuck atomic.Bool
	once  bool // only the first Load once stuck is stuck
}

func (s *stuckStore) Load(ctx context.Context, id string) (conversation.Manifest, io.ReadCloser, error) {
	if s.stuck.Load() {
		if s.once {
			s.stuck.Store(false) // the next Load answers
		}
		<-ctx.Done()
		return conversation.Manifest{}, nil, ctx.Err()
	}
	return s.Store.Load(ctx, id)
}

// countingRelease counts the releases of a lease.
type countingRelease struct {
	sandbox.Sandbox
	n *atomic.Int32
}

func (c countingRelease) Release(ctx context.Context) error {
	c.n.Add(1)
	return c.Sandbox.Release(ctx)
}

// stuckConversation stores conversation c1 through a stuckStore and then
// makes its loads hang until their context ends (once: only the first).
func stuckConversation(t *testing.T, once bool) *stuckStore {
	t.Helper()
	fs, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	store := &stuckStore{Store: fs, once: once}
	_, err = Run(context.Background(), storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
write .fake/sessions/c1.jsonl 10
`+finished))
	require.NoError(t, err)
	store.stuck.Store(true)
	return store
}

// TestDeadlineDuringRestoreIsATimeout: a turn whose deadline runs out
// while the stored conversation is restored into its lease is a timeout,
// as one past its deadline while the lease is acquired or seeded is — not
// a session error (the conversation is fine; a session error invites a
// re-seed or dropping the conversation) — and its lease is released.
func TestDeadlineDuringRestoreIsATimeout(t *testing.T) {
	store := stuckConversation(t, false)
	turn := storeTurn(t, store, finished)
	turn.Input.Continue = "c1"
	turn.Limits.Deadline = 300 * time.Millisecond
	var released atomic.Int32
	turn.Provider = wrappingProvider{turn.Provider, func(sb sandbox.Sandbox) sandbox.Sandbox {
		return countingRelease{sb, &released}
	}}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	require.NotNil(t, res)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
	assert.False(t, res.Exited, "the CLI never ran")
	assert.Equal(t, int32(1), released.Load(), "the lease is released once")
}

// TestDeadlineDuringRestoreNoReseed: with Reseed set, a restore cut off by
// the deadline is no reason to start the CLI again in a new conversation
// past the deadline.
func TestDeadlineDuringRestoreNoReseed(t *testing.T) {
	store := stuckConversation(t, true)
	turn := storeTurn(t, store, finished)
	turn.Input.Continue = "c1"
	turn.Reseed = true
	turn.Limits.Deadline = 300 * time.Millisecond
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
	assert.False(t, res.Exited, "no CLI ran past the deadline")
	for _, w := range res.Warnings {
		assert.NotContains(t, w, "could not be resumed")
	}
}

// ctxRelease records whether the context its Release got was still live.
type ctxRelease struct {
	sandbox.Sandbox
	n    *atomic.Int32
	dead *atomic.Int32
}

func (c ctxRelease) Release(ctx context.Context) error {
	c.n.Add(1)
	if ctx.Err() != nil {
		c.dead.Add(1)
	}
	return c.Sandbox.Release(ctx)
}

// TestCancelledTurnReleasesWithLiveContext: a turn cancelled while its CLI
// runs is aborted, keeps the events it had, and releases its lease once,
// under a context that is not the cancelled one; no goroutine outlives it.
func TestCancelledTurnReleasesWithLiveContext(t *testing.T) {
	// A first turn starts what a process starts once (the runtime's own
	// helpers), so the count after the turns is comparable.
	_, err := Run(context.Background(), fakeTurn(t, finished))
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	for _, deadline := range []bool{false, true} {
		turn := fakeTurn(t, `emit {"type":"conversation","id":"c9"}
emit {"type":"text","text":"working"}
hang`)
		var n, dead atomic.Int32
		turn.Provider = wrappingProvider{turn.Provider, func(sb sandbox.Sandbox) sandbox.Sandbox {
			return ctxRelease{sb, &n, &dead}
		}}
		ctx, cancel := context.WithCancel(context.Background())
		if deadline {
			turn.Limits.Deadline = 2 * time.Second
		} else {
			turn.OnEvent = func(ev adapters.Event) {
				if ev.Kind == adapters.KindText {
					cancel()
				}
			}
		}
		res, err := Run(ctx, turn)
		cancel()
		require.Error(t, err)
		want := outposterr.Aborted
		if deadline {
			want = outposterr.Timeout
		}
		assert.Equal(t, want, outposterr.ClassOf(err), "%v", err)
		assert.Equal(t, "c9", res.Conversation)
		assert.Equal(t, 1, res.Counts[adapters.KindText], "the events before the stop are kept")
		assert.Equal(t, int32(1), n.Load(), "released once")
		assert.Zero(t, dead.Load(), "released under a live context")
	}
	// Polled here: assert.Eventually would count its own goroutines.
	extra := runtime.NumGoroutine() - before
	for end := time.Now().Add(30 * time.Second); extra > 0 && time.Now().Before(end); extra = runtime.NumGoroutine() - before {
		runtime.Gosched()
		<-time.After(20 * time.Millisecond)
	}
	assert.LessOrEqual(t, extra, 0, "goroutines left after the turns")
	if extra > 0 {
		buf := make([]byte, 1<<20)
		t.Logf("%d extra goroutines:\n%s", extra, buf[:runtime.Stack(buf, true)])
	}
}
