package docker

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/outpost-dev/outpost/internal/lines"
)

// lifeStream reads the output of the lifeline's attach: the engine's
// multiplexed stream (8-byte frame headers: stream, 3 zero bytes,
// big-endian length) of the container's main process's stdout and stderr.
// The forward entrypoint and the keeper report there in lines; a command
// the keeper ran writes its output there (see keeperrun.go).
type lifeStream struct {
	frames *demux
	// lines reads the reports from stdout; what it read past the last one
	// is its Rest.
	lines *lines.Reader
}

// maxReportLine bounds a report line.
const maxReportLine = 4096

func newLifeStream(r io.Reader) *lifeStream {
	d := &demux{r: r, errw: io.Discard}
	lr := lines.NewReader(d, maxReportLine)
	lr.OversizedAtOnce()
	return &lifeStream{frames: d, lines: lr}
}

// line reads the next line written on stdout; other streams' frames are
// dropped until then. It reads no further than the frame that ends the
// line; what follows the line there is kept for the next call. Whatever
// length a frame's header claims, nothing is allocated for it: a line is
// refused past maxReportLine.
func (s *lifeStream) line() (string, error) {
	b, oversized, err := s.lines.Next()
	switch {
	case oversized:
		return "", errors.New("report line too long")
	case err == nil && s.lines.Ended():
		return string(b), nil
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "", errors.New("the container ended before it reported")
	}
	return "", err
}

// copyTo writes what is left of the stream to out (stdout) and errw
// (stderr) until it ends: first what line read past its last line, then
// frame by frame, streamed in pieces whatever length a header claims. It
// returns nil when the stream ends between frames, io.ErrUnexpectedEOF
// when it ends inside one. A writer's error does not stop it: the
// stream is read to its end either way, so the engine is never held up by
// an unread attach.
func (s *lifeStream) copyTo(out, errw io.Writer) error {
	s.frames.errw = errw
	_, err := io.Copy(ignoreErrors{out}, s.lines.Rest())
	return err
}

// demux reads the stdout frames of a multiplexed stream as one stream,
// each read within one frame; the payloads of stderr frames go to errw as
// they stream past, those of other streams nowhere. Not stdcopy, which the
// execs use: it copies ahead into its writers, where the reports must be
// read first and only what follows them goes to the keeper's command
// (copyTo), and it buffers a whole frame, whatever length its header claims.
type demux struct {
	r    io.Reader
	errw io.Writer
	left int64 // of the stdout frame being read
}

func (d *demux) Read(p []byte) (int, error) {
	var hdr [8]byte
	for d.left == 0 {
		// io.EOF at a frame's end, io.ErrUnexpectedEOF inside a header.
		if _, err := io.ReadFull(d.r, hdr[:]); err != nil {
			return 0, err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if hdr[0] == 1 {
			d.left = n
			continue
		}
		w := io.Discard
		if hdr[0] == 2 {
			w = ignoreErrors{d.errw}
		}
		if _, err := io.CopyN(w, d.r, n); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= int64(n)
	if errors.Is(err, io.EOF) && d.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// ignoreErrors is a writer that reports every write as done: what its
// writer refused is dropped.
type ignoreErrors struct{ w io.Writer }

func (i ignoreErrors) Write(b []byte) (int, error) {
	_, _ = i.w.Write(b)
	return len(b), nil
}
