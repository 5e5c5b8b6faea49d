package docker

import (
	"cmp"
	"context"
	"errors"
	"os"
	"sync"

	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/internal/wscopy"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// copyProvider gives each lease a private copy of its workspace, owned by
// the lease user, and brings the copy's changes back into the workspace at
// release. The outpost command uses it when it runs as root on a workspace
// owned by root (a CI runner's checkout): the lease user (never root)
// could not write the workspace itself, and changing its ownership is not
// Outpost's to do. Files written back in place keep their owner; new ones
// are the workspace owner's.
type copyProvider struct {
	*Provider
}

// Acquire copies spec.Workspace into a temporary directory of the lease
// user (the paths of spec.Hide left out) and leases with that instead.
func (c copyProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	ws, fi, err := leasekit.StatWorkspace(spec.Workspace)
	if err != nil {
		return nil, err
	}
	if fi == nil {
		return c.Provider.Acquire(ctx, spec) // no workspace to copy
	}
	wsUID, wsGID, ok := safefs.Owner(fi)
	if !ok {
		return nil, outposterr.New(outposterr.Sandbox, "workspace %s: cannot read its owner", ws)
	}
	uid, gid, err := parseUser(cmp.Or(spec.User, c.opts.User))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(c.opts.TempDir, "outpost-workspace-")
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "create the workspace copy")
	}
	base, err := wscopy.Copy(ws, tmp, uid, gid, spec.Hide)
	if err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "copy the workspace %s for the lease", ws), os.RemoveAll(tmp))
	}
	inner := spec
	inner.Workspace = tmp
	sb, err := c.Provider.Acquire(ctx, inner)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmp))
	}
	return &copiedLease{Sandbox: sb, workspace: ws, copy: tmp, base: base, uid: wsUID, gid: wsGID, hide: spec.Hide}, nil
}

// copiedLease is a lease on a workspace copy.
type copiedLease struct {
	sandbox.Sandbox
	workspace, copy string
	base            wscopy.Base
	uid, gid        int
	hide            []string

	mu   sync.Mutex
	done bool
}

// Release removes the container, then writes the copy's changes back into
// the workspace (only what the lease changed: a concurrent lease's
// changes, written back first, stay) and removes the copy. A failed write-back keeps the copy
// and names it.
func (l *copiedLease) Release(ctx context.Context) error {
	if err := l.Sandbox.Release(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	if err := wscopy.Sync(l.copy, l.workspace, l.base, l.uid, l.gid, l.hide); err != nil {
		l.done = true
		return outposterr.Wrap(outposterr.Sandbox, err, "write the lease's changes back into %s (they are kept in %s)", l.workspace, l.copy)
	}
	l.done = true
	if err := os.RemoveAll(l.copy); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "remove the workspace copy %s", l.copy)
	}
	return nil
}

// Unwrap returns the container lease (see [sandbox.GoneReason]).
func (l *copiedLease) Unwrap() sandbox.Sandbox { return l.Sandbox }
