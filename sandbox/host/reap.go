package host

import (
	"context"
	"os"
	"time"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// The reaper exists because a lease directory (the private home with the
// CLI's logins and transcripts) is removed by its owner's Release, and an
// owner can die without running it: kill -9, a crash, a lost CI runner.
// Every lease directory records its owning process, so a later `outpost gc`
// can tell leftovers from the leases of runs still going on.

// LeasePrefix starts the name of every lease directory in Options.TempDir.
const LeasePrefix = "outpost-host-"

// writeOwner records o as the owner of the lease directory dir (0600).
func writeOwner(dir string, o procowner.Owner) error {
	return procowner.WriteRecord(dir, procowner.Record{Owner: o})
}

// DefaultReapGrace is how old a lease directory whose owner cannot be
// judged here (another host, no owner record) must be before [Reap]
// removes it.
const DefaultReapGrace = 24 * time.Hour

// ReapOptions tune [Reap]. The zero value removes the lease directories of
// dead owners in os.TempDir() and unjudgeable ones older than
// [DefaultReapGrace].
type ReapOptions struct {
	// TempDir is where the provider created its leases (Options.TempDir).
	// Empty: os.TempDir().
	TempDir string
	// DryRun, Grace (the age of a lease directory), Hostname, Now, Alive:
	// see [sandbox.ReapOptions].
	sandbox.ReapOptions
}

// Leftover is a lease directory found by [Reap].
type Leftover struct {
	// Path is the lease directory.
	Path string
	// Owner is its recorded owner (zero when there is no record).
	Owner procowner.Owner
	// Reason says why it counts as left over.
	Reason string
	// Removed is set when Reap removed it (never in a dry run).
	Removed bool
}

// Reap finds lease directories (LeasePrefix*) under opts.TempDir whose
// owning process is gone and removes them unless opts.DryRun; those of live
// owners are left alone. Only directories that belong to this user are
// considered (a link or another user's directory is never touched), and
// removal never follows links. It returns every leftover found; removal
// errors are joined as a sandbox error.
func Reap(ctx context.Context, opts ReapOptions) ([]Leftover, error) {
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	pol := procowner.Policy{Grace: opts.Grace, Hostname: opts.Hostname, Now: opts.Now, Alive: opts.Alive}
	pol.Defaults(DefaultReapGrace)
	found, err := procowner.Sweep{Dir: opts.TempDir, Prefix: LeasePrefix, Policy: pol, Unrecorded: true,
		DryRun: opts.DryRun}.Run(ctx)
	out := make([]Leftover, 0, len(found))
	for _, f := range found {
		out = append(out, Leftover{Path: f.Path, Owner: f.Owner, Reason: f.Reason, Removed: f.Removed})
	}
	if err != nil {
		return out, outposterr.Wrap(outposterr.Sandbox, err, "reap host leases in %s", opts.TempDir)
	}
	return out, nil
}
