package harness

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Recording is a recorded run of a CLI: what it printed and how it exited.
type Recording struct {
	Stdout io.Reader
	Stderr io.Reader // may be nil
	Exit   sandbox.ExitStatus
	// At is the instant every replayed event is stamped with; relative and
	// clock-time quota resets are resolved against it. Zero: time.Now.
	At time.Time
}

// Replay re-decodes a recorded run exactly as [Run] would have judged it
// live: the same decoder, recognizers, classification and bounds (a line
// over MaxLineBytes is dropped with a warning; Result.Text is bounded).
// Stdout is replayed first, then stderr. It is how old logs are re-scored.
// Cancelling ctx stops reading; the result is then an aborted error.
func Replay(ctx context.Context, a adapters.Adapter, rec Recording, onEvent func(adapters.Event), keepEvents bool) *Result {
	at := rec.At
	if at.IsZero() {
		at = time.Now()
	}
	now := func() time.Time { return at }
	res := &Result{Agent: a.Name(), Started: at, Counts: map[adapters.Kind]int{}, Exit: rec.Exit, Exited: true}
	col := newCollector(a, now, onEvent, keepEvents, DefaultLimits(), res)
	// The streams are read by a goroutine so that a read that never returns
	// (a silent pipe) cannot hold Replay after ctx ends; it is abandoned.
	type item struct {
		line   []byte
		over   bool
		stderr bool
		err    error // a read error, or nil at the end of both streams
		end    bool
	}
	items := make(chan item, 16)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		send := func(it item) bool {
			select {
			case items <- it:
				return true
			case <-quit:
				return false
			}
		}
		for _, src := range []struct {
			r      io.Reader
			stderr bool
		}{{rec.Stdout, false}, {rec.Stderr, true}} {
			if src.r == nil {
				continue
			}
			lr := lines.NewReader(src.r, MaxLineBytes)
			lr.StopWhen(ctx.Err)
			for {
				l, over, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					send(item{stderr: src.stderr, err: err, end: true})
					return
				}
				if !send(item{line: append([]byte(nil), l...), over: over, stderr: src.stderr}) {
					return
				}
			}
		}
		send(item{end: true})
	}()
	var readErr error
	for done := false; !done; {
		select {
		case it := <-items:
			switch {
			case it.end:
				if it.err != nil {
					stream := "stdout"
					if it.stderr {
						stream = "stderr"
					}
					readErr = readError(ctx, stream, it.err)
				}
				done = true
			case it.over:
				col.warn(oversizedWarning)
			case it.stderr:
				col.stderrLine(it.line)
			default:
				col.stdoutLine(it.line)
			}
		case <-ctx.Done():
			readErr = outposterr.Wrap(outposterr.Aborted, ctx.Err(), "replay interrupted")
			done = true
		}
	}
	res.Err = classify(col, verdict{exit: rec.Exit, exited: true})
	if readErr != nil {
		res.Err = readErr
	}
	col.finalize()
	return res
}

// readError classifies a failure to read a recording.
func readError(ctx context.Context, stream string, err error) error {
	if ctx.Err() != nil {
		return outposterr.Wrap(outposterr.Aborted, err, "replay interrupted while reading recorded %s", stream)
	}
	return outposterr.Wrap(outposterr.Configuration, err, "read recorded %s", stream)
}
