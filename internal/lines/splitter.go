package lines

import "bytes"

// Splitter splits input that is pushed to it in pieces, as a tee sees a
// stream someone else reads, into lines bounded like [Reader]'s: a line
// longer than the bound is skipped to its newline and reported with
// oversized set and no data, never buffered whole. A line that arrives
// whole in one write is passed on without a copy.
type Splitter struct {
	max     int
	emit    func(line []byte, oversized bool)
	partial []byte // the unfinished line so far
	over    bool   // the unfinished line passed the bound
}

// NewSplitter returns a Splitter that calls emit with each line, without
// its trailing "\n", as its newline arrives. The slice is valid during the
// call only. max bounds a line as in [NewReader].
func NewSplitter(max int, emit func(line []byte, oversized bool)) *Splitter {
	if max <= 0 {
		max = MaxBytes
	}
	return &Splitter{max: max, emit: emit}
}

// Write splits b into lines; it never fails.
func (s *Splitter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.keep(b)
			break
		}
		if len(s.partial) == 0 && !s.over {
			s.emit(s.bounded(b[:i]))
		} else {
			s.keep(b[:i])
			s.End()
		}
		b = b[i+1:]
	}
	return n, nil
}

// End emits the unfinished line, if any: the last line of an input that
// did not end with a newline. A caller whose input was cut rather than
// ended does not call it.
func (s *Splitter) End() {
	if len(s.partial) > 0 || s.over {
		s.emit(s.bounded(s.partial))
	}
	s.partial, s.over = s.partial[:0], false
	if cap(s.partial) > 1<<20 {
		s.partial = nil // a long line's buffer is not kept for the short ones after it
	}
}

// bounded is line as emit receives it.
func (s *Splitter) bounded(line []byte) ([]byte, bool) {
	if s.over || len(line) > s.max {
		return nil, true
	}
	return line, false
}

// keep buffers part of the unfinished line up to the bound.
func (s *Splitter) keep(b []byte) {
	if s.over {
		return
	}
	if len(s.partial)+len(b) > s.max {
		s.over, s.partial = true, s.partial[:0]
		return
	}
	s.partial = append(s.partial, b...)
}
