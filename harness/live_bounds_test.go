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
)

// readySession is a live session whose turn always takes a message; it
// encodes every message as a short line.
type readySession struct{ adapters.Decoder }

func (readySession) Pending() []byte                    { return nil }
func (readySession) Ready() bool                        { return true }
func (readySession) Done() bool                         { return false }
func (readySession) EncodeInput(string) ([]byte, error) { return []byte("m\n"), nil }

// TestLiveInputBytesBoundHoldsWhileTheCLIDoesNotRead: the documented
// bound (MaxLiveQueue messages, MaxLiveQueueBytes) covers every message
// the CLI has not taken, also those handed to the stdin writer: a CLI
// that stops reading does not make the harness hold more.
func TestLiveInputBytesBoundHoldsWhileTheCLIDoesNotRead(t *testing.T) {
	res := &Result{}
	col := newCollector(fakecli.New("fake"), time.Now, nil, true, DefaultLimits(), res)
	r, w := io.Pipe() // never read: the first write blocks
	feed := newLiveFeed(readySession{}, w, make(chan string), col)
	msg := strings.Repeat("m", 1<<20)
	taken := 0
	for taken < 4*MaxLiveQueue && !feed.full() {
		feed.add(msg)
		taken++
	}
	assert.LessOrEqual(t, taken*len(msg), MaxLiveQueueBytes+len(msg),
		"messages the CLI never read are held past the %d MiB bound", MaxLiveQueueBytes>>20)
	feed.close()
	_ = r.Close() // the CLI is gone: the writer's blocked write fails
	feed.reportDropped(time.Minute)
	assert.Contains(t, res.Warnings, "64 live input message(s) not delivered: the CLI did not read them")
}

// TestLiveInputUnwrittenIsReported: messages handed to a CLI that stopped
// reading and was then stopped never reach it; each is reported.
func TestLiveInputUnwrittenIsReported(t *testing.T) {
	turn := fakeTurn(t, "expect 1 stall") // takes one message, then reads nothing
	turn.Limits.IdleTimeout = time.Second
	live := make(chan string, 20)
	live <- "one"
	big := strings.Repeat("b", 1<<20) // more than a pipe holds
	for range 19 {
		live <- big
	}
	turn.Live = live
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, 20, res.Counts[adapters.KindInput])
	assert.Contains(t, res.Warnings, "19 live input message(s) not delivered: the CLI did not read them")
}

// TestLiveInputAfterTheEndWarnsOnce: a sender that keeps sending after
// the turn ended gets one warning with the count, not one per message.
func TestLiveInputAfterTheEndWarnsOnce(t *testing.T) {
	res := &Result{}
	col := newCollector(fakecli.New("fake"), time.Now, nil, true, DefaultLimits(), res)
	r, w := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	feed := newLiveFeed(doneSession{}, w, make(chan string), col) // finishes at once
	for range 10000 {
		feed.add("late")
	}
	feed.close()
	require.Equal(t, 1, len(res.Warnings), "one warning, not one per message")
	assert.Equal(t, "10000 live input message(s) not delivered: the turn had ended", res.Warnings[0])
}
