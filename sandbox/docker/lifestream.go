package docker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// lifeStream reads the output of the lifeline's attach: the engine's
// multiplexed stream (8-byte frame headers: stream, 3 zero bytes,
// big-endian length) of the container's main process's stdout and stderr.
// The forward entrypoint and the keeper report there in lines; a command
// the keeper ran writes its output there (see keeperrun.go).
type lifeStream struct {
	r io.Reader
	// rest is stdout read past the last line returned by line.
	rest []byte
}

// maxReportLine bounds a report line, with what follows it in the same
// frame.
const maxReportLine = 4096

// line reads the next line written on stdout, skipping other streams'
// frames. It reads no further than the frame that ends the line and keeps
// what follows the line in that frame for the next call. A frame is never
// read into memory beyond maxReportLine, whatever length its header
// claims: other streams' frames are discarded as they stream past.
func (s *lifeStream) line() (string, error) {
	line := s.rest
	s.rest = nil
	var hdr [8]byte
	for {
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			if i+1 < len(line) {
				s.rest = bytes.Clone(line[i+1:])
			}
			return string(line[:i]), nil
		}
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errors.New("the container ended before it reported")
			}
			return "", err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if hdr[0] != 1 {
			if _, err := io.CopyN(io.Discard, s.r, n); err != nil {
				return "", err
			}
			continue
		}
		if int64(len(line))+n > maxReportLine {
			return "", errors.New("report line too long")
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(s.r, buf); err != nil {
			return "", err
		}
		line = append(line, buf...)
	}
}

// copyTo writes what is left of the stream to out (stdout) and errw
// (stderr) until it ends: first what line read past its last line, then
// frame by frame, streamed in pieces whatever length a header claims. It
// returns nil at the stream's end. A writer's error does not stop it: the
// stream is read to its end either way, so the engine is never held up by
// an unread attach.
func (s *lifeStream) copyTo(out, errw io.Writer) error {
	if len(s.rest) > 0 {
		_, _ = out.Write(s.rest)
		s.rest = nil
	}
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		w := io.Discard
		switch hdr[0] {
		case 1:
			w = out
		case 2:
			w = errw
		}
		if _, err := io.CopyN(ignoreErrors{w}, s.r, n); err != nil {
			return err
		}
	}
}

// ignoreErrors is a writer that reports every write as done: what its
// writer refused is dropped.
type ignoreErrors struct{ w io.Writer }

func (i ignoreErrors) Write(b []byte) (int, error) {
	_, _ = i.w.Write(b)
	return len(b), nil
}
