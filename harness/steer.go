package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

// steer is live input for a CLI that takes no messages into a running turn
// but can continue a conversation (interrupt-and-resume): a message stops
// the running CLI with SIGINT once it has named its conversation, and the
// turn goes on in the same lease as the next attempt on that conversation,
// with the message as its prompt. The caller sees one turn: one result,
// usage summed, events in order with an input event where each message
// went in.
type steer struct {
	src         <-chan string
	pending     []string
	queued      liveQueue
	interrupted bool  // the last attempt was stopped to take a message
	seq         int64 // the last event's sequence number, across attempts
}

func (s *steer) add(m string) { s.pending = append(s.pending, m); s.queued.add(m) }

func (s *steer) full() bool { return s.queued.full() }

func (s *steer) waiting() bool { return s != nil && len(s.pending) > 0 }

// steerable reports whether live input reaches a's turns by interrupting
// and resuming: a's CLI has no live input of its own but can continue a
// conversation.
func steerable(a adapters.Adapter) bool {
	if _, ok := a.(adapters.LiveInput); ok {
		return false
	}
	return a.Capabilities().Resumable
}

// runSteered runs a live turn of a CLI without live input: attempts on one
// conversation until no message waits.
func runSteered(ctx context.Context, t Turn, started time.Time) (*Result, error) {
	st := &steer{src: t.Live}
	t.steer = st
	in := t.Input
	var prev *Result
	for {
		st.interrupted = false
		res, err := runReseed(ctx, t, in, prevCumulative(prev))
		if prev != nil {
			res = joinSteered(t, prev, res)
		}
		res.Started = started
		res.Duration = t.Now().Sub(started)
		// Messages sent while the attempt wound down wait in the channel.
		msgs := append(st.pending, ready(st.src, &st.queued)...)
		st.pending, st.queued = nil, liveQueue{}
		if len(msgs) == 0 {
			return res, err
		}
		var why string
		switch {
		case ctx.Err() != nil:
			why = "the turn was cancelled"
		case err != nil && !st.interrupted:
			why = "the turn failed first"
		case res.Conversation == "":
			why = "the CLI named no conversation to continue"
		}
		if why != "" {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%d live input message(s) not delivered: %s", len(msgs), why))
			return res, err
		}
		t.Logger.Debug("live input: continuing the conversation with the message", "agent", res.Agent,
			"conversation", res.Conversation, "messages", len(msgs))
		for _, m := range msgs {
			st.seq++
			ev := adapters.Event{Seq: st.seq, Time: t.Now(), Kind: adapters.KindInput, Text: m}
			res.Counts[adapters.KindInput]++
			if t.KeepEvents && len(res.Events) < t.Limits.KeptEvents {
				res.Events = append(res.Events, ev)
			}
			if t.OnEvent != nil {
				t.OnEvent(ev)
			}
		}
		in.Continue, in.Fork, in.Prompt = res.Conversation, false, strings.Join(msgs, "\n\n")
		t.Reseed = false
		prev = res
	}
}

// ready takes the messages src holds without waiting, while q has room.
func ready(src <-chan string, q *liveQueue) []string {
	var out []string
	for !q.full() {
		select {
		case m, ok := <-src:
			if !ok {
				return out
			}
			out = append(out, m)
			q.add(m)
		default:
			return out
		}
	}
	return out
}

func prevCumulative(r *Result) *usage.Usage {
	if r == nil {
		return nil
	}
	return r.cumulative
}

// joinSteered makes next the result of the whole turn so far: prev's
// events before its own, usage and counts summed, warnings kept.
func joinSteered(t Turn, prev, next *Result) *Result {
	events := append(prev.Events, next.Events...)
	if t.KeepEvents && len(events) > t.Limits.KeptEvents {
		events = events[:t.Limits.KeptEvents]
	}
	next.Events = events
	next.Usage = prev.Usage.Add(next.Usage)
	for k, n := range prev.Counts {
		next.Counts[k] += n
	}
	if next.Conversation == "" {
		next.Conversation = prev.Conversation
	}
	warn := "live input: the CLI takes no messages into a running turn; it was interrupted and the conversation continued with the message"
	if len(prev.Warnings) == 0 || prev.Warnings[0] != warn {
		prev.Warnings = append([]string{warn}, prev.Warnings...)
	}
	next.Warnings = append(prev.Warnings, next.Warnings...)
	next.joinSecretPrinted(prev)
	return next
}
