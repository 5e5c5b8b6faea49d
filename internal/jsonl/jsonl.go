// Package jsonl reads JSON-lines files that may be hostile: every line is
// bounded, malformed lines are reported with their numbers, and nothing it
// reads can make it panic or grow without bound.
package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/outpost-dev/outpost/internal/lines"
)

// LineError is one malformed line.
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// MaxReported bounds the malformed lines an [Error] lists.
const MaxReported = 10

// Error lists the malformed lines of one input.
type Error struct {
	// Name names the input ("results.jsonl").
	Name string
	// Lines holds at most MaxReported malformed lines; Count counts them all.
	Lines []LineError
	Count int
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d malformed line", e.Name, e.Count)
	if e.Count != 1 {
		b.WriteString("s")
	}
	for i, l := range e.Lines {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(l.Error())
	}
	if len(e.Lines) > 0 {
		if e.Count > len(e.Lines) {
			fmt.Fprintf(&b, "; %d more", e.Count-len(e.Lines))
		}
		b.WriteString(")")
	}
	return b.String()
}

// Options bound a read.
type Options struct {
	// MaxLine bounds one line in bytes (0: 16 MiB). A longer line is
	// malformed; reading goes on after it.
	MaxLine int
	// MaxLines bounds the lines read (0: no bound); the rest are skipped
	// and Result.Skipped says how many bytes were left.
	MaxLines int
	// SkipComments skips lines whose first non-blank byte is '#'.
	SkipComments bool
}

// Result says how a read ended.
type Result struct {
	// Lines counts the lines handed to the callback.
	Lines int
	// Torn is set when the last line had no newline and did not decode: a
	// writer stopped mid-line (a crash). It is not counted as malformed.
	Torn bool
	// Truncated is set when MaxLines stopped the read early.
	Truncated bool
}

// Decode reads r line by line and decodes each non-blank line into a fresh
// value with newV, then hands it to fn with its 1-based line number. A line
// that does not decode, or that fn rejects, is malformed; decoding goes on
// and every malformed line is reported in one *Error. An error reading r
// itself is returned as it is.
func Decode[T any](r io.Reader, name string, opts Options, fn func(line int, v T) error) (Result, error) {
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	var res Result
	bad := &Error{Name: name}
	report := func(n int, err error) {
		bad.Count++
		if len(bad.Lines) < MaxReported {
			bad.Lines = append(bad.Lines, LineError{Line: n, Err: err})
		}
	}
	lr := lines.NewReader(r, opts.MaxLine)
	for n := 1; ; n++ {
		line, over, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		if opts.MaxLines > 0 && res.Lines >= opts.MaxLines {
			res.Truncated = true
			break
		}
		t := bytes.TrimSpace(line)
		switch {
		case over:
			report(n, fmt.Errorf("longer than %d bytes", opts.MaxLine))
		case len(t) == 0, opts.SkipComments && t[0] == '#':
		default:
			var v T
			switch derr := json.Unmarshal(t, &v); {
			case derr != nil && !lr.Ended():
				res.Torn = true
			case derr != nil:
				report(n, derr)
			default:
				res.Lines++
				if ferr := fn(n, v); ferr != nil {
					report(n, ferr)
				}
			}
		}
	}
	if bad.Count > 0 {
		return res, bad
	}
	return res, nil
}

// Lenient unmarshals b into v leniently: a field of an unexpected type is
// skipped and the rest is kept. It reports false only when b is not JSON
// at all (v is then partly filled at most). Readers of a CLI's or a
// model API's JSON use it, where one odd field must not cost the rest.
func Lenient(b []byte, v any) bool {
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	return err == nil || errors.As(err, &te)
}
