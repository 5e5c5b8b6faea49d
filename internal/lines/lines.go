// Package lines reads newline-delimited input with a bound on each line, so
// memory never follows the input: a line longer than the bound is skipped up
// to its newline and reported, never buffered. The turn engine, replay,
// live input and the reports on a Docker lease's lifeline all read through
// a Reader; input pushed in pieces (the gateway's usage meter sees a
// response as the proxy reads it) goes through a Splitter.
package lines

import (
	"bufio"
	"errors"
	"io"
)

// MaxBytes is the default bound on one line: 16 MiB.
const MaxBytes = 16 << 20

// Reader reads bounded lines.
type Reader struct {
	br     *bufio.Reader
	max    int
	buf    []byte
	stop   func() error
	atOnce bool // report an oversized line as soon as it passes the bound
	ended  bool // the last line Next returned ended with a newline
}

// NewReader returns a Reader over r whose lines are at most max bytes
// (0: [MaxBytes]).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = MaxBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// StopWhen makes Next check stop between reads and return its error when
// it is not nil, so a caller can end a read that never sees a newline (an
// endless line from /dev/zero) with its context: r.StopWhen(ctx.Err).
func (r *Reader) StopWhen(stop func() error) { r.stop = stop }

// OversizedAtOnce makes Next report an oversized line as soon as it passes
// the bound instead of reading on to its newline, for a caller that treats
// such a line as the end of the input (an error): an endless line then
// costs the bound, not the time to reach a newline that may never come.
// The Reader is then in the middle of that line.
func (r *Reader) OversizedAtOnce() { r.atOnce = true }

// Next returns the next line without its trailing "\n". The slice is valid
// until the next call. A line over the bound is skipped and reported with
// oversized set and no data. A last line without a newline is returned
// before io.EOF. err is io.EOF at the end of the input, or the read error.
func (r *Reader) Next() (line []byte, oversized bool, err error) {
	if cap(r.buf) > 1<<20 {
		r.buf = nil // a long line's buffer is not kept for the short ones after it
	}
	r.buf = r.buf[:0]
	r.ended = false
	over := false
	for {
		if r.stop != nil {
			if err := r.stop(); err != nil {
				return nil, false, err
			}
		}
		chunk, err := r.br.ReadSlice('\n')
		if len(chunk) > 0 && !over {
			if len(r.buf)+len(chunk) > r.max+1 { // +1: the newline is not part of the line
				over = true
				r.buf = nil // let the collector have it while the line is skipped
				if r.atOnce {
					return nil, true, nil
				}
			} else {
				r.grow(len(chunk))
				r.buf = append(r.buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && len(r.buf) == 0 && !over {
			return nil, false, err
		}
		if over {
			// Report the oversized line now; a read error surfaces next call.
			return nil, true, nil
		}
		b := r.buf
		if n := len(b); n > 0 && b[n-1] == '\n' {
			b = b[:n-1]
			r.ended = true
		} else if len(b) > r.max {
			return nil, true, nil
		}
		return b, false, nil
	}
}

// Ended reports whether the last line Next returned ended with a newline:
// false for a last line the input stopped in (a writer that crashed
// mid-line, a header without its end).
func (r *Reader) Ended() bool { return r.ended }

// Rest returns the input after the last line Next returned, buffered bytes
// included, for a caller that reads a header line and then a stream.
func (r *Reader) Rest() io.Reader { return r.br }

// grow makes room for n more bytes. Past 1 MiB a line's buffer goes
// straight to the bound: appending in small steps would leave tens of MiB
// of garbage behind on the way to 16 MiB.
func (r *Reader) grow(n int) {
	need := len(r.buf) + n
	if need <= cap(r.buf) || need <= 1<<20 {
		return
	}
	b := make([]byte, len(r.buf), r.max+1)
	copy(b, r.buf)
	r.buf = b
}
