package cli

import (
	"bytes"
	"errors"
	"io"

	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
)

// nonEmpty returns the items read from the input the user knows as name,
// or err, or a configuration error when the input held none (what: their
// plural, "jobs").
func nonEmpty[T any](items []T, err error, name, what string) ([]T, error) {
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, outposterr.New(outposterr.Configuration, "%s holds no %s", name, what)
	}
	return items, nil
}

// eachInputLine reads in, which the user knows as name, a line at a time:
// memory holds one line, never the whole input, and an endless line
// (/dev/zero) fails at bound, with an error that calls the line a "what
// line". Blank lines are skipped; fn gets every other line's number, its
// offset in the input, the line as read and the line trimmed, and stops the
// reading with an error.
func eachInputLine(in io.Reader, name, what string, bound int, fn func(n int, at int64, raw, line []byte) error) error {
	lr := lines.NewReader(in, bound)
	lr.OversizedAtOnce()
	var offset int64 // of the line read next
	for n := 1; ; n++ {
		raw, over, err := lr.Next()
		at := offset
		offset += int64(len(raw)) + 1
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "read %ss from %s", what, name)
		}
		if over {
			return outposterr.New(outposterr.Configuration, "%s line %d: longer than the %d MiB bound on a %s line", name, n, bound>>20, what)
		}
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		if err := fn(n, at, raw, line); err != nil {
			return err
		}
	}
}
