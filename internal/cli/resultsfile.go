package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/outpost-dev/outpost/outposterr"
)

// resultsFile is a batch's results file, open for appending and locked for
// the batch's whole run, from reading it back to the verdict: a second
// outpost batch on the same file is refused instead of running the same
// jobs again and interleaving its lines.
type resultsFile struct {
	path string
	fh   *os.File
	// created: the file did not exist; it is removed again when the run
	// ends without a line in it.
	created bool
}

// openResults opens (creating it when missing) and locks the results file
// at path. A file that is not a regular one (/dev/null) is not locked.
func openResults(path string) (*resultsFile, error) {
	rf := &resultsFile{path: path}
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		fh, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		rf.created = err == nil
		if errors.Is(err, fs.ErrExist) { // another batch created it just now
			fh, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
		}
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "open results")
	}
	rf.fh = fh
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return rf, nil
	}
	if err := lockExclusive(fh); err != nil {
		_ = fh.Close()
		return nil, outposterr.Wrap(outposterr.Configuration, err,
			"results file %s is in use by another outpost batch: wait for it to end, or choose another --results file", path)
	}
	return rf, nil
}

// close releases the lock; a file this run created and left empty is
// removed.
func (rf *resultsFile) close() {
	if rf.created {
		if fi, err := rf.fh.Stat(); err == nil && fi.Size() == 0 {
			_ = os.Remove(rf.path)
		}
	}
	_ = rf.fh.Close()
}

// mendTail makes the file end with a newline before lines are appended to
// it: a last line a killed writer cut (not a whole JSON value) is cut off,
// as readResults ignored it (its job runs again); a whole last line without
// its newline gets one. Without this the next line would be glued to it
// and both be lost. It returns the bytes cut off.
func (rf *resultsFile) mendTail() (int64, error) {
	fi, err := rf.fh.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return 0, err
	}
	size := fi.Size()
	last := make([]byte, 1)
	if _, err := rf.fh.ReadAt(last, size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return 0, nil
	}
	// Find the start of the last line, reading backwards in chunks; a line
	// is at most maxResultLine.
	start := int64(0)
	buf := make([]byte, 64<<10)
	for end := size; end > 0 && size-end <= maxResultLine; {
		n := min(int64(len(buf)), end)
		if _, err := rf.fh.ReadAt(buf[:n], end-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			start = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	tail := make([]byte, 0, min(size-start, maxResultLine+1))
	if size-start <= maxResultLine {
		tail = tail[:size-start]
		if _, err := rf.fh.ReadAt(tail, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	if t := bytes.TrimSpace(tail); len(t) == 0 || json.Valid(t) {
		_, err := rf.fh.Write([]byte{'\n'})
		return 0, err
	}
	if err := rf.fh.Truncate(start); err != nil {
		return 0, err
	}
	return size - start, nil
}

// mendResultsTail mends the tail of the results file at path (mendTail) if
// it exists, telling w when it cut a torn line off.
func mendResultsTail(w io.Writer, path string) error {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|noFollowResults, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "open results")
	}
	rf := &resultsFile{path: path, fh: fh}
	defer rf.close()
	return rf.mend(w)
}

// mend is mendTail, telling w when it cut a torn line off.
func (rf *resultsFile) mend(w io.Writer) error {
	cut, err := rf.mendTail()
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "mend the last line of %s", rf.path)
	}
	if cut > 0 {
		fmt.Fprintf(w, "%s: the last line was torn (a writer stopped mid-line): cut off its %d bytes; its job runs again\n", rf.path, cut)
	}
	return nil
}
