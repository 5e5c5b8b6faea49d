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

// kinds lists the events' kinds, with the text of input and text events.
func kinds(evs []adapters.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case adapters.KindInput, adapters.KindText:
			out = append(out, string(ev.Kind)+":"+ev.Text)
		case adapters.KindConversation, adapters.KindResult, adapters.KindFinished:
			out = append(out, string(ev.Kind))
		}
	}
	return out
}

func TestLiveInputQueuedUntilReady(t *testing.T) {
	turn := fakeTurn(t, "expect 2")
	live := make(chan string, 2)
	live <- "alpha" // sent before the turn can take them: they wait
	live <- "beta"
	turn.Live = live
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "warnings %v stderr %s", res.Warnings, res.StderrTail)
	assert.Equal(t, "heard alpha, beta", res.Text)
	assert.Equal(t, []string{"conversation", "input:alpha", "input:beta", "text:heard alpha", "text:heard beta",
		"result", "finished"}, kinds(res.Events))
	assert.Empty(t, res.Warnings, "stdin was closed when the turn finished, so the CLI exited on its own")
	assert.True(t, res.Exited)
	assert.Equal(t, 0, res.Exit.Code)
}

func TestLiveInputDuringTurn(t *testing.T) {
	turn := fakeTurn(t, "expect 3")
	live := make(chan string) // unbuffered: each send waits for the harness
	turn.Live = live
	// Each message is sent only after the previous one was heard, so all of
	// them reach a turn that is already running.
	heard := make(chan struct{}, 3)
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText {
			heard <- struct{}{}
		}
	}
	go func() {
		for i, m := range []string{"one", "two", "three"} {
			live <- m
			if i < 2 {
				<-heard
			}
		}
	}()
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "warnings %v stderr %s", res.Warnings, res.StderrTail)
	assert.Equal(t, "heard one, two, three", res.Text)
	assert.Equal(t, 3, res.Counts[adapters.KindInput])
}

func TestLiveInputUndeliveredIsReported(t *testing.T) {
	turn := fakeTurn(t, "expect 0") // finishes without ever being ready
	live := make(chan string, 1)
	live <- "too late"
	turn.Live = live
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Counts[adapters.KindInput])
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "1 live input message(s) not delivered")
}

func TestLiveInputCancelled(t *testing.T) {
	turn := fakeTurn(t, "expect 5")
	live := make(chan string, 1)
	live <- "only"
	turn.Live = live
	ctx, cancel := context.WithCancel(context.Background())
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText {
			cancel() // the CLI waits for four more messages
		}
	}
	res, err := Run(ctx, turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
	assert.Equal(t, 1, res.Counts[adapters.KindInput])
	assert.Equal(t, "live-1", res.Conversation)
}

func TestLiveInputIdleTimeout(t *testing.T) {
	turn := fakeTurn(t, "expect 1 hang")
	turn.Live = make(chan string) // nothing ever sent
	turn.Limits.IdleTimeout = 500 * time.Millisecond
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", res.Warnings)
}

func TestLiveInputRefusedWithoutCapability(t *testing.T) {
	turn := fakeTurn(t, "expect 1")
	// An adapter without live input: the fake's methods minus LiveRequest.
	turn.Adapter = struct{ adapters.Adapter }{&fakecli.Adapter{Path: turn.Adapter.Binary(), Caps: &adapters.Capabilities{RequiresFinished: true}}}
	turn.Live = make(chan string)
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "does not take live input")
}

// doneSession is a live session whose turn has already finished.
type doneSession struct{ adapters.Decoder }

func (doneSession) Pending() []byte                    { return nil }
func (doneSession) Ready() bool                        { return false }
func (doneSession) Done() bool                         { return true }
func (doneSession) EncodeInput(string) ([]byte, error) { return nil, nil }

func TestLiveInputAfterTheEndIsReported(t *testing.T) {
	res := &Result{}
	col := newCollector(fakecli.New("fake"), time.Now, nil, true, DefaultLimits(), res)
	r, w := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	feed := newLiveFeed(doneSession{}, w, make(chan string), col) // finishes at once
	feed.add("late")
	feed.close()
	assert.Equal(t, []string{"1 live input message(s) not delivered: the turn had ended"}, res.Warnings)
	assert.Zero(t, res.Counts[adapters.KindInput])
}
