package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"syscall"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// copyInScript extracts stdin under $1 as the lease user: modes kept
// (-p), owner always the user (--no-same-owner). GNU tar strips leading "/"
// and refuses members containing "..".
const copyInScript = `mkdir -p -- "$1" && exec tar -x -p --no-same-owner -f - -C "$1"`

// copyOutScript writes $1/$2 as a tar stream named relative to $1.
// Exit 3 means the path does not exist.
const copyOutScript = `cd -- "$1" || exit 3
if [ ! -e "$2" ] && [ ! -L "$2" ]; then echo "$1/$2: no such file or directory" >&2; exit 3; fi
exec tar -c -f - -- "$2"`

// checkSandboxPath accepts absolute, clean paths other than "/".
func checkSandboxPath(p string) error {
	if p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsRune(p, 0) {
		return outposterr.New(outposterr.Configuration, "sandbox path %q must be absolute and clean", p)
	}
	return nil
}

// CopyIn implements [sandbox.Sandbox] by running tar in the pod, fed through
// the exec's standard input. The archive is checked entry by entry on its
// way in (the rules of the Docker provider: no absolute names, no ".."
// components, no symbolic links that are absolute or lead outside the
// destination, no hard links to such names, no special files); at the first
// unsafe entry the extraction is killed and CopyIn fails with a
// configuration error.
func (l *lease) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	if err := checkSandboxPath(dir); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	defer pr.Close()
	p, err := l.start(ctx, execSpec{
		args:   []string{"sh", "-c", copyInScript, "outpost-copyin", dir},
		dir:    "/",
		stream: pr,
	})
	if err != nil {
		return fmt.Errorf("copy into %s: %w", dir, err)
	}
	defer p.Close()
	stderr, done := leasekit.TailOf(p.Stderr(), 4096)
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	// A tar that ends early stops reading its input: unblock the writer.
	go func() {
		_, _ = p.Wait()
		_ = pr.CloseWithError(errors.New("tar in the pod ended before its input"))
	}()
	if ferr := leasekit.SafeTar(pw, r); ferr != nil {
		// Kill tar before it sees the end of its input and finishes a
		// partial extraction.
		kerr := p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, true)
		pw.CloseWithError(ferr)
		st, _ := p.Wait()
		leasekit.AwaitOutput(done)
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			ferr = fmt.Errorf("%w (tar %s: %s)", ferr, st, msg)
		}
		return outposterr.Wrap(outposterr.Sandbox, errors.Join(ferr, kerr), "copy into %s", dir)
	}
	pw.Close()
	st, err := p.Wait()
	leasekit.AwaitOutput(done)
	if err != nil {
		return fmt.Errorf("copy into %s: %w", dir, err)
	}
	if !st.Success() {
		return outposterr.New(outposterr.Sandbox, "copy into %s: tar %s: %s", dir, st, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// CopyOut implements [sandbox.Sandbox] by running tar in the pod. A missing
// path is an error wrapping [fs.ErrNotExist]. A tar failure after the stream
// started is returned by Read at the end of the stream.
func (l *lease) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := checkSandboxPath(p); err != nil {
		return nil, err
	}
	proc, err := l.start(ctx, execSpec{
		args: []string{"sh", "-c", copyOutScript, "outpost-copyout", path.Dir(p), path.Base(p)},
		dir:  "/",
	})
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	return leasekit.CopyOut(proc, p)
}
