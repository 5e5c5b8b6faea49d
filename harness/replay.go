package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/outpost-dev/outpost/adapters"
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
// live: the same decoder, recognizers and classification. Stdout is replayed
// first, then stderr. It is how old logs are re-scored. See [ReplayContext].
func Replay(a adapters.Adapter, rec Recording, onEvent func(adapters.Event), keepEvents bool) *Result {
	return ReplayContext(context.Background(), a, rec, onEvent, keepEvents)
}

// ReplayContext is [Replay] until ctx ends: the result is then an aborted
// error with what was decoded so far. Memory is bounded whatever the input:
// a line longer than [MaxLineBytes] is dropped (and said) up to its
// newline, so an endless line (/dev/zero) costs time, not memory. A read
// blocked when ctx ends is abandoned to its reader.
func ReplayContext(ctx context.Context, a adapters.Adapter, rec Recording, onEvent func(adapters.Event), keepEvents bool) *Result {
	at := rec.At
	if at.IsZero() {
		at = time.Now()
	}
	now := func() time.Time { return at }
	res := &Result{Agent: a.Name(), Started: at, Counts: map[adapters.Kind]int{}, Exit: rec.Exit, Exited: true}
	col := newCollector(a, now, onEvent, keepEvents, DefaultTailBytes, res)
	type item struct {
		data      []byte
		stderr    bool
		oversized bool
		done      bool
		err       error
	}
	lines := make(chan item, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		send := func(it item) bool {
			select {
			case lines <- it:
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
			err := scanLines(src.r, quit, func(b []byte, over bool) bool {
				return send(item{data: b, stderr: src.stderr, oversized: over})
			})
			if errors.Is(err, errQuit) {
				return
			}
			if err != nil {
				what := "stdout"
				if src.stderr {
					what = "stderr"
				}
				send(item{done: true, err: outposterr.Wrap(outposterr.Configuration, err, "read recorded %s", what)})
				return
			}
		}
		send(item{done: true})
	}()
	var readErr error
loop:
	for {
		select {
		case <-ctx.Done():
			readErr = outposterr.Wrap(outposterr.Aborted, ctx.Err(), "replay interrupted")
			break loop
		case it := <-lines:
			switch {
			case it.done:
				readErr = it.err
				break loop
			case it.oversized:
				col.warn("dropped an output line longer than 16 MiB")
			case it.stderr:
				col.stderrLine(it.data)
			default:
				col.stdoutLine(it.data)
			}
		}
	}
	res.Err = classify(col, verdict{exit: rec.Exit, exited: true})
	if readErr != nil {
		res.Err = readErr
	}
	col.finalize()
	return res
}

// errQuit ends scanLines when its caller stops listening.
var errQuit = errors.New("stopped")

// scanLines splits r into lines without their newline and hands each to
// emit, keeping at most MaxLineBytes of a line: a longer one is handed over
// as oversized (no data) once its newline (or the end) is reached. It
// returns nil at the end of r, errQuit when quit is closed or emit declines.
func scanLines(r io.Reader, quit <-chan struct{}, emit func(b []byte, oversized bool) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	over := false
	for {
		select {
		case <-quit:
			return errQuit
		default:
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !over {
			if len(buf)+len(chunk) > MaxLineBytes+1 {
				over, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil || (errors.Is(err, io.EOF) && (len(buf) > 0 || over)) {
			if over {
				if !emit(nil, true) {
					return errQuit
				}
			} else {
				b := bytes.TrimSuffix(buf, []byte("\n"))
				if len(b) > MaxLineBytes {
					if !emit(nil, true) {
						return errQuit
					}
				} else if !emit(append([]byte(nil), b...), false) {
					return errQuit
				}
			}
			buf, over = buf[:0], false
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
