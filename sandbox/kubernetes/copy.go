package kubernetes

import (
	"context"
	"io"
)

// startTar is the Start of the lease's TarCopy (CopyIn and CopyOut).
func (l *lease) startTar(ctx context.Context, argv []string, stdin io.Reader) (*process, error) {
	return l.start(ctx, execSpec{args: argv, dir: "/", stream: stdin})
}
