package leasekit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// CopyOutExitMissing is the exit code of a copy-out script whose path does
// not exist.
const CopyOutExitMissing = 3

// CopyOut streams the tar archive a copy-out process writes on stdout. It
// waits for the first byte (or the end), so a missing path (exit
// [CopyOutExitMissing]) is reported at once as fs.ErrNotExist; a tar that
// fails later is reported at the end of the stream with its stderr. Close
// closes proc.
func CopyOut(proc sandbox.Process, path string) (io.ReadCloser, error) {
	rc := &copyOutReader{p: proc, path: path, br: bufio.NewReaderSize(proc.Stdout(), 64<<10)}
	rc.stderr, rc.errDone = TailOf(proc.Stderr(), 4096)
	if _, err := rc.br.Peek(1); err != nil {
		err := rc.finish()
		_ = proc.Close()
		if err == nil {
			err = outposterr.New(outposterr.Sandbox, "copy out %s: empty archive", path)
		}
		return nil, err
	}
	return rc, nil
}

// copyOutReader streams a CopyOut archive and reports tar's failure at EOF.
type copyOutReader struct {
	p       sandbox.Process
	path    string
	br      *bufio.Reader
	stderr  *TailBuffer
	errDone <-chan struct{}
	once    sync.Once
	err     error
}

func (r *copyOutReader) Read(b []byte) (int, error) {
	n, err := r.br.Read(b)
	if errors.Is(err, io.EOF) {
		if ferr := r.finish(); ferr != nil {
			return n, ferr
		}
	}
	return n, err
}

// finish waits for tar and turns a failure into an error.
func (r *copyOutReader) finish() error {
	r.once.Do(func() {
		st, err := r.p.Wait()
		AwaitOutput(r.errDone)
		switch {
		case err != nil:
			r.err = fmt.Errorf("copy out %s: %w", r.path, err)
		case st.Code == CopyOutExitMissing:
			r.err = fmt.Errorf("copy out %s: %w", r.path, fs.ErrNotExist)
		case !st.Success():
			r.err = outposterr.New(outposterr.Sandbox, "copy out %s: tar %s: %s", r.path, st, bytes.TrimSpace(r.stderr.Bytes()))
		}
	})
	return r.err
}

func (r *copyOutReader) Close() error { return r.p.Close() }
