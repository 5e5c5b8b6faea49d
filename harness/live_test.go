package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
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
	assert.Contains(t, err.Error(), "takes no live input into a running turn and cannot continue a conversation")
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

// noLiveInput hides the fake's live-input protocol: a CLI that can only
// continue a conversation. It records each request's conversation to
// continue and prompt.
type noLiveInput struct {
	adapters.Adapter
	mu       sync.Mutex
	requests []adapters.Input
}

func (a *noLiveInput) Request(in adapters.Input) (sandbox.Command, error) {
	a.mu.Lock()
	a.requests = append(a.requests, in)
	a.mu.Unlock()
	return a.Adapter.Request(in)
}

// TestSteerInterruptsAndResumes: live input to a CLI without live input
// interrupts the running CLI once it named its conversation and continues
// that conversation with the message as the prompt: one result, usage
// summed, events in order with the input where it went in.
//
// The message is sent once the first attempt reported its usage: a CLI
// interrupted before it prints its usage has reported none, and the sum
// would then rightly hold the second attempt's alone.
func TestSteerInterruptsAndResumes(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
emit {"type":"text","text":"working"}
emit {"type":"usage","scope":"turn","input":5,"output":2}
hang`)
	a := &noLiveInput{Adapter: turn.Adapter}
	turn.Adapter = a
	msg := `emit {"type":"conversation","id":"c1"}
emit {"type":"text","text":"steered"}
emit {"type":"usage","scope":"turn","input":7,"output":3}
emit {"type":"result","text":"steered"}
emit {"type":"finished","ok":true}`
	live := make(chan string, 1)
	turn.Live = live
	var seqs []int64
	turn.OnEvent = func(ev adapters.Event) {
		seqs = append(seqs, ev.Seq)
		if ev.Kind == adapters.KindUsage && ev.Usage != nil && ev.Usage.Input == 5 {
			live <- msg
		}
	}
	start := time.Now()
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "warnings %v stderr %s", res.Warnings, res.StderrTail)
	assert.Less(t, time.Since(start), 30*time.Second, "the hanging CLI was interrupted, not waited for")
	assert.Equal(t, "steered", res.Text)
	assert.Equal(t, "c1", res.Conversation)
	assert.Equal(t, []string{"conversation", "text:working", "input:" + msg, "conversation", "text:steered", "result", "finished"},
		kinds(res.Events))
	assert.Equal(t, int64(12), res.Usage.Input, "usage of both attempts")
	assert.Equal(t, int64(5), res.Usage.Output)
	assert.Equal(t, 1, res.Counts[adapters.KindInput])
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1], "event numbers keep increasing across attempts")
	}
	var ran []adapters.Input // without Validate's check of the command
	for _, in := range a.requests {
		if in.Workdir != "" {
			ran = append(ran, in)
		}
	}
	require.Len(t, ran, 2)
	assert.Equal(t, "", ran[0].Continue)
	assert.Equal(t, "c1", ran[1].Continue, "the message continues the same conversation")
	assert.Equal(t, msg, ran[1].Prompt)
	require.NotEmpty(t, res.Warnings)
	assert.Contains(t, res.Warnings[0], "it was interrupted and the conversation continued with the message")
}

// TestSteerKeepsOutputInFlight: what the CLI printed before it was
// interrupted counts even when the harness took the message before it read
// those lines: the interrupted attempt's output is read to its end, so no
// usage is lost to a steer.
func TestSteerKeepsOutputInFlight(t *testing.T) {
	printed := filepath.Join(t.TempDir(), "printed")
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
emit {"type":"usage","scope":"turn","input":5,"output":2}
ws-put `+printed+` usage
hang`)
	turn.Adapter = &noLiveInput{Adapter: turn.Adapter}
	msg := `emit {"type":"conversation","id":"c1"}
emit {"type":"usage","scope":"turn","input":7,"output":3}
emit {"type":"result","text":"steered"}
emit {"type":"finished","ok":true}`
	live := make(chan string, 1)
	turn.Live = live
	var once sync.Once
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind != adapters.KindConversation {
			return
		}
		once.Do(func() {
			// The harness waits here, so the usage line the CLI prints
			// meanwhile is still unread when the message arrives.
			assert.Eventually(t, func() bool { _, err := os.Stat(printed); return err == nil },
				time.Minute, 5*time.Millisecond, "the CLI printed its usage")
			live <- msg
		})
	}
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "warnings %v stderr %s", res.Warnings, res.StderrTail)
	assert.Equal(t, "steered", res.Text)
	assert.Equal(t, int64(12), res.Usage.Input, "the interrupted attempt's usage was read after the interrupt")
	assert.Equal(t, int64(5), res.Usage.Output)
}

// TestSteerWithoutConversationIsReported: a message for a CLI that never
// names its conversation cannot be delivered; the turn stands and says so.
func TestSteerWithoutConversationIsReported(t *testing.T) {
	turn := fakeTurn(t, `sleep 300ms
emit {"type":"result","text":"done"}
emit {"type":"finished","ok":true}`)
	turn.Adapter = &noLiveInput{Adapter: turn.Adapter}
	live := make(chan string, 1)
	live <- "too early"
	turn.Live = live
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "done", res.Text)
	assert.Contains(t, res.Warnings, "1 live input message(s) not delivered: the CLI named no conversation to continue")
}

// TestLiveInputBackpressure: a CLI that stops reading its input does not
// make the harness queue a sender's messages without bound: once the
// queues are full the harness takes no more and the sender blocks.
func TestLiveInputBackpressure(t *testing.T) {
	turn := fakeTurn(t, "expect 1 stall") // takes one message, then reads nothing
	turn.Limits.IdleTimeout = time.Second
	live := make(chan string)
	turn.Live = live
	var sent atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	msg := strings.Repeat("m", 1024)
	go func() {
		for {
			select {
			case live <- msg:
				sent.Add(1)
			case <-stop:
				return
			}
		}
	}()
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err))
	// Two queues of MaxLiveQueue (the harness's and the stdin writer's),
	// one batch in the writer's hands, what the pipe holds, and what the
	// end of the turn counts as undelivered.
	assert.Less(t, sent.Load(), int64(5*MaxLiveQueue), "the sender was held back")
}

// TestSteerDeadlineBoundsTheWholeTurn: one deadline bounds a steered turn
// end to end — acquisition, the interrupted attempt and the continuation —
// so a continuation that would fit in a deadline of its own still times
// out when the turn as a whole is past it.
func TestSteerDeadlineBoundsTheWholeTurn(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
emit {"type":"usage","scope":"turn","input":5,"output":2}
hang`)
	turn.Adapter = &noLiveInput{Adapter: turn.Adapter}
	turn.Provider = slowAcquire{Provider: turn.Provider, delay: time.Second}
	turn.Limits.Deadline = 3 * time.Second
	msg := `emit {"type":"conversation","id":"c1"}
sleep 2500ms
emit {"type":"result","text":"late"}
emit {"type":"finished","ok":true}`
	live := make(chan string, 1)
	turn.Live = live
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindUsage && ev.Usage != nil && ev.Usage.Input == 5 {
			live <- msg
		}
	}
	res, err := Run(context.Background(), turn)
	require.Error(t, err, "%+v", res)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
	assert.Equal(t, 1, res.Counts[adapters.KindInput], "the message was delivered: the continuation ran")
}
