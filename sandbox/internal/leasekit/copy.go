package leasekit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Process is a kind's process as CopyIn and CopyOut use it: a
// [sandbox.Process] whose group can be signalled ([Proc.SignalGroup]).
type Process interface {
	sandbox.Process
	SignalGroup(ctx context.Context, sig syscall.Signal, mark, clean bool) error
}

// Start is how a kind runs the tar of CopyIn and CopyOut: argv as a command
// of the lease user working in "/", stdin its standard input (nil: none).
type Start[P Process] func(ctx context.Context, argv []string, stdin io.Reader) (P, error)

// TarCopy is a container kind's [sandbox.Sandbox.CopyIn] and
// [sandbox.Sandbox.CopyOut] ([CopyIn], [CopyOut]); a lease embeds it with
// the Start of its tar.
type TarCopy[P Process] struct {
	Start Start[P]
}

// CopyIn implements [sandbox.Sandbox] by running tar in the lease (so every
// path of the lease is reachable, its tmpfs home included), fed through its
// standard input. The archive is checked entry by entry on its way in ([CheckEntry]:
// no absolute names, no ".." components, no symbolic links that are
// absolute or lead outside the destination, no hard links to such names, no
// special files); at the first unsafe entry the extraction is killed and
// CopyIn fails with a configuration error. A tar that stops before the end
// of its input (a full disk) fails CopyIn with a sandbox error holding its
// stderr.
func (c TarCopy[P]) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	return CopyIn(ctx, c.Start, dir, r)
}

// CopyOut implements [sandbox.Sandbox] by running tar in the lease. A
// missing path is an error wrapping [fs.ErrNotExist]. A tar failure after
// the stream started is returned by Read at the end of the stream.
func (c TarCopy[P]) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return CopyOut(ctx, c.Start, p)
}

// copyInScript extracts stdin under $1 as the lease user: modes kept
// (-p), owner always the user (--no-same-owner, also when the user is 0).
// GNU tar strips leading "/" and refuses members containing "..".
const copyInScript = `mkdir -p -- "$1" && exec tar -x -p --no-same-owner -f - -C "$1"`

// copyOutScript writes $1/$2 as a tar stream named relative to $1.
// Exit [CopyOutExitMissing] means the path does not exist.
const copyOutScript = `cd -- "$1" || exit 3
if [ ! -e "$2" ] && [ ! -L "$2" ]; then echo "$1/$2: no such file or directory" >&2; exit 3; fi
exec tar -c -f - -- "$2"`

// CopyOutExitMissing is the exit code of a copy-out script whose path does
// not exist.
const CopyOutExitMissing = 3

// CheckSandboxPath accepts absolute, clean paths other than "/"; anything
// else is a configuration error.
func CheckSandboxPath(p string) error {
	if p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsRune(p, 0) {
		return outposterr.New(outposterr.Configuration, "sandbox path %q must be absolute and clean", p)
	}
	return nil
}

// CopyIn is a container kind's [sandbox.Sandbox.CopyIn]: it extracts the tar
// stream r under dir by running tar in the lease through start, fed through
// its standard input. The archive is checked entry by entry on its way in
// ([SafeTar]); at the first unsafe entry the extraction is killed and CopyIn
// fails with a configuration error. A tar that ends before its input (a
// full disk, a lease going away) releases the writer and fails CopyIn with a
// sandbox error holding tar's stderr.
func CopyIn[P Process](ctx context.Context, start Start[P], dir string, r io.Reader) error {
	if err := CheckSandboxPath(dir); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	defer pr.Close()
	p, err := start(ctx, []string{"sh", "-c", copyInScript, "outpost-copyin", dir}, pr)
	if err != nil {
		return fmt.Errorf("copy into %s: %w", dir, err)
	}
	defer p.Close()
	stderr, done := TailOf(p.Stderr(), 4096)
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	// A tar that ends early stops reading its input: unblock the writer.
	go func() {
		_, _ = p.Wait()
		_ = pr.CloseWithError(errors.New("tar in the lease ended before its input"))
	}()
	if ferr := SafeTar(pw, r); ferr != nil {
		// Kill tar before it sees the end of its input and finishes a
		// partial extraction.
		kerr := p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, true)
		pw.CloseWithError(ferr)
		st, _ := p.Wait()
		AwaitOutput(done)
		class := outposterr.Sandbox // tar stopped reading
		if outposterr.Is(ferr, outposterr.Configuration) {
			class = outposterr.Configuration // the archive is at fault
		}
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			ferr = fmt.Errorf("%w (tar %s: %s)", ferr, st, msg)
		}
		return outposterr.Wrap(class, errors.Join(ferr, kerr), "copy into %s", dir)
	}
	pw.Close()
	st, err := p.Wait()
	AwaitOutput(done)
	if err != nil {
		return fmt.Errorf("copy into %s: %w", dir, err)
	}
	if !st.Success() {
		return outposterr.New(outposterr.Sandbox, "copy into %s: tar %s: %s", dir, st, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// CopyOut is a container kind's [sandbox.Sandbox.CopyOut]: it streams the
// tar archive of p that tar writes on its stdout in the lease, started
// through start. It waits for the first byte (or the end), so a missing path
// is reported at once as an error wrapping fs.ErrNotExist; a tar that fails
// later is reported at the end of the stream with its stderr.
func CopyOut[P Process](ctx context.Context, start Start[P], p string) (io.ReadCloser, error) {
	if err := CheckSandboxPath(p); err != nil {
		return nil, err
	}
	proc, err := start(ctx, []string{"sh", "-c", copyOutScript, "outpost-copyout", path.Dir(p), path.Base(p)}, nil)
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	rc := &copyOutReader{p: proc, path: p, br: bufio.NewReaderSize(proc.Stdout(), 64<<10)}
	rc.stderr, rc.errDone = TailOf(proc.Stderr(), 4096)
	if _, err := rc.br.Peek(1); err != nil {
		err := rc.finish()
		_ = proc.Close()
		if err == nil {
			err = outposterr.New(outposterr.Sandbox, "copy out %s: empty archive", p)
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
