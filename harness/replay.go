package harness

import (
	"bufio"
	"bytes"
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
// first, then stderr. It is how old logs are re-scored.
func Replay(a adapters.Adapter, rec Recording, onEvent func(adapters.Event), keepEvents bool) *Result {
	at := rec.At
	if at.IsZero() {
		at = time.Now()
	}
	now := func() time.Time { return at }
	res := &Result{Agent: a.Name(), Started: at, Counts: map[adapters.Kind]int{}, Exit: rec.Exit, Exited: true}
	col := newCollector(a, now, onEvent, keepEvents, DefaultTailBytes, res)
	feed := func(r io.Reader, f func([]byte)) error {
		if r == nil {
			return nil
		}
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				l = bytes.TrimSuffix(l, []byte("\n"))
				if len(l) > MaxLineBytes {
					col.warn("dropped an output line longer than 16 MiB")
				} else {
					f(l)
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	var readErr error
	if err := feed(rec.Stdout, col.stdoutLine); err != nil {
		readErr = outposterr.Wrap(outposterr.Configuration, err, "read recorded stdout")
	}
	if err := feed(rec.Stderr, col.stderrLine); err != nil && readErr == nil {
		readErr = outposterr.Wrap(outposterr.Configuration, err, "read recorded stderr")
	}
	res.Err = classify(col, verdict{exit: rec.Exit, exited: true})
	if readErr != nil {
		res.Err = readErr
	}
	col.finalize()
	return res
}
