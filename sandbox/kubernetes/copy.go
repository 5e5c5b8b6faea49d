package kubernetes

import (
	"context"
	"io"

	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// CopyIn implements [sandbox.Sandbox] by running tar in the pod, fed through
// the exec's standard input. The archive is checked entry by entry on its
// way in (the rules of the Docker provider: no absolute names, no ".."
// components, no symbolic links that are absolute or lead outside the
// destination, no hard links to such names, no special files); at the first
// unsafe entry the extraction is killed and CopyIn fails with a
// configuration error. A tar that stops before the end of its input (a full
// disk) fails CopyIn with a sandbox error holding its stderr.
func (l *lease) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	return leasekit.CopyIn(ctx, l.startTar, dir, r)
}

// CopyOut implements [sandbox.Sandbox] by running tar in the pod. A missing
// path is an error wrapping [fs.ErrNotExist]. A tar failure after the stream
// started is returned by Read at the end of the stream.
func (l *lease) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return leasekit.CopyOut(ctx, l.startTar, p)
}

// startTar is the [leasekit.Start] of CopyIn and CopyOut.
func (l *lease) startTar(ctx context.Context, argv []string, stdin io.Reader) (*process, error) {
	return l.start(ctx, execSpec{args: argv, dir: "/", stream: stdin})
}
