package docker

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/internal/procowner"
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
	// The copy is the workspace subdirectory of a directory of root's
	// that also holds the owner record: should this process die without
	// releasing the lease (kill -9), `outpost gc` or the next run removes
	// it (see [ReapCopies]).
	dir, err := os.MkdirTemp(c.opts.TempDir, CopyPrefix)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "create the workspace copy")
	}
	rec := procowner.Record{Owner: procowner.Self(), Created: time.Now().UTC()}
	if err := procowner.WriteRecord(dir, rec); err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "record the workspace copy's owner"), os.RemoveAll(dir))
	}
	tmp := filepath.Join(dir, copyWorkspace)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "create the workspace copy"), os.RemoveAll(dir))
	}
	base, err := wscopy.Copy(ws, tmp, uid, gid, spec.Hide)
	if err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "copy the workspace %s for the lease", ws), os.RemoveAll(dir))
	}
	inner := spec
	inner.Workspace = tmp
	sb, err := c.Provider.Acquire(ctx, inner)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return &copiedLease{Sandbox: sb, workspace: ws, dir: dir, copy: tmp, rec: rec, base: base, uid: wsUID, gid: wsGID, hide: spec.Hide}, nil
}

// copiedLease is a lease on a workspace copy.
type copiedLease struct {
	sandbox.Sandbox
	workspace, copy string
	dir             string // holds copy and the owner record
	rec             procowner.Record
	base            wscopy.Base
	uid, gid        int
	hide            []string

	mu   sync.Mutex
	done bool
}

// Release removes the container, then writes the copy's changes back into
// the workspace (only what the lease changed: a concurrent lease's
// changes, written back first, stay) and removes the copy. A failed
// write-back keeps the copy and names it; so does one cut short by this
// process's death (kill -9), for `outpost gc` names it and leaves it too.
func (l *copiedLease) Release(ctx context.Context) error {
	if err := l.Sandbox.Release(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	// From here until the copy is gone, it may hold changes the workspace
	// lacks: the record says to keep it. Should the record not take, it
	// goes, so that no sweep takes the copy for a dead run's either.
	keep := l.rec
	keep.Keep = "its write-back into " + l.workspace + " did not finish (that may be partly written); the lease's changes are in " +
		l.copy + ": remove it once they are safe"
	if err := procowner.WriteRecord(l.dir, keep); err != nil {
		_ = os.Remove(filepath.Join(l.dir, procowner.RecordFile))
	}
	if err := wscopy.Sync(l.copy, l.workspace, l.base, l.uid, l.gid, l.hide); err != nil {
		l.done = true
		return outposterr.Wrap(outposterr.Sandbox, err, "write the lease's changes back into %s (they are kept in %s)", l.workspace, l.copy)
	}
	l.done = true
	if err := os.RemoveAll(l.dir); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "remove the workspace copy %s", l.copy)
	}
	return nil
}

// Unwrap returns the container lease (see [sandbox.GoneReason]).
func (l *copiedLease) Unwrap() sandbox.Sandbox { return l.Sandbox }

// CopyPrefix starts the name of the directory in Options.TempDir that a
// lease on a root-owned workspace (outpost running as root) works in: it
// holds the copy (its workspace subdirectory) and the copy's owner record.
const CopyPrefix = "outpost-rootcopy-"

// copyWorkspace is the copy inside a CopyPrefix directory.
const copyWorkspace = "workspace"

// CopyLeftover is a workspace copy found by [ReapCopies].
type CopyLeftover struct {
	// Path is the CopyPrefix directory.
	Path string
	// Reason says why it counts as left over and, when Kept, why it stays.
	Reason string
	// Kept is set for a copy whose write-back into its workspace had begun
	// (and did not finish): it holds changes the workspace may lack, and
	// is never removed.
	Kept bool
	// Removed is set when ReapCopies removed it (never in a dry run).
	Removed bool
}

// ReapCopies finds the workspace copies (CopyPrefix* in tempDir; empty:
// os.TempDir()) whose runner died without releasing their lease (kill -9,
// a crash), judging owners as [Reap] does, and removes them unless
// opts.DryRun. Nothing was written back from such a copy; one whose
// write-back had begun is reported as Kept and stays. Copies of live
// runners, directories without an owner record, links and directories of
// other users are left alone, and removal never follows a link.
func ReapCopies(ctx context.Context, tempDir string, opts ReapOptions) ([]CopyLeftover, error) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	found, err := procowner.Sweep{Dir: tempDir, Prefix: CopyPrefix, Policy: policy(opts), DryRun: opts.DryRun}.Run(ctx)
	out := make([]CopyLeftover, 0, len(found))
	for _, f := range found {
		out = append(out, CopyLeftover{Path: f.Path, Reason: f.Reason, Kept: f.Kept, Removed: f.Removed})
	}
	if err != nil {
		return out, outposterr.Wrap(outposterr.Sandbox, err, "reap workspace copies in %s", tempDir)
	}
	return out, nil
}
