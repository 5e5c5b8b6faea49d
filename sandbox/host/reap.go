package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
)

// The reaper exists because a lease directory (the private home with the
// CLI's logins and transcripts) is removed by its owner's Release, and an
// owner can die without running it: kill -9, a crash, a lost CI runner.
// Every lease directory records its owning process, so a later `outpost gc`
// can tell leftovers from the leases of runs still going on.

// LeasePrefix starts the name of every lease directory in Options.TempDir.
const LeasePrefix = "outpost-host-"

// ownerFile is the owner record inside a lease directory.
const ownerFile = "owner.json"

// maxOwnerBytes bounds the owner record read by [Reap].
const maxOwnerBytes = 4 << 10

// record is what a lease directory's owner file holds.
type record struct {
	procowner.Owner
	Created time.Time `json:"created"`
}

// writeOwner records o as the owner of the lease directory dir (0600).
func writeOwner(dir string, o procowner.Owner) error {
	b, err := json.Marshal(record{Owner: o, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), b, 0o600)
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
	// DryRun lists leftovers without removing them.
	DryRun bool
	// Grace: see [DefaultReapGrace] (zero: that; negative: never by age).
	Grace time.Duration
	// Hostname is this host's name as owners record it. Empty: os.Hostname().
	Hostname string
	// Now is the current time. Nil: time.Now.
	Now func() time.Time
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
	pol := procowner.Policy{Grace: opts.Grace, Hostname: opts.Hostname, Now: opts.Now}
	pol.Defaults(DefaultReapGrace)
	entries, err := os.ReadDir(opts.TempDir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "list %s", opts.TempDir)
	}
	var out []Leftover
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if !strings.HasPrefix(e.Name(), LeasePrefix) || !e.IsDir() {
			continue // a link (or anything else) is never followed
		}
		dir := filepath.Join(opts.TempDir, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if uid, _, ok := safefs.Owner(fi); !ok || uid != os.Geteuid() {
			continue
		}
		lo := Leftover{Path: dir}
		if !leftover(&lo, fi, pol) {
			continue
		}
		if !opts.DryRun {
			if err := removeAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
			} else {
				lo.Removed = true
			}
		}
		out = append(out, lo)
	}
	if err := errors.Join(errs...); err != nil {
		return out, outposterr.Wrap(outposterr.Sandbox, err, "reap host leases")
	}
	return out, nil
}

// leftover decides whether the lease directory lo.Path (info fi) has lost
// its owner and sets lo.Owner and lo.Reason.
func leftover(lo *Leftover, fi fs.FileInfo, pol procowner.Policy) bool {
	created := fi.ModTime()
	if rec, ok := readOwner(lo.Path); ok {
		lo.Owner = rec.Owner
		if !rec.Created.IsZero() {
			created = rec.Created
		}
	}
	var left bool
	lo.Reason, left = pol.Leftover(lo.Owner, created, "it")
	return left
}

// readOwner reads a lease directory's owner record: a regular file (never
// a link), bounded.
func readOwner(dir string) (record, bool) {
	f, err := openNoFollow(filepath.Join(dir, ownerFile))
	if err != nil {
		return record{}, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return record{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxOwnerBytes+1))
	if err != nil || len(b) > maxOwnerBytes {
		return record{}, false
	}
	var r record
	if json.Unmarshal(b, &r) != nil {
		return record{}, false
	}
	return r, true
}
