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
	feed := func(r io.Reader, f func([]byte)) error {
		if r == nil {
			return nil
		}
		lr := lines.NewReader(r, MaxLineBytes)
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			l, over, err := lr.Next()
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case err != nil:
				return err
			case over:
				col.warn(oversizedWarning)
			default:
				f(l)
			}
		}
	}
	var readErr error
	if err := feed(rec.Stdout, col.stdoutLine); err != nil {
		readErr = readError(ctx, "stdout", err)
	}
	if readErr == nil {
		if err := feed(rec.Stderr, col.stderrLine); err != nil {
			readErr = readError(ctx, "stderr", err)
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
