package procowner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/internal/safefs"
)

// A directory a process creates in the temporary directory (a host
// sandbox's lease, a Docker lease's copy of a root-owned workspace) holds an
// owner record, so that a later [Sweep] can remove it once its owner died
// without removing it (kill -9, a crash) and leave those of live owners.

// RecordFile is the owner record inside such a directory.
const RecordFile = "owner.json"

// maxRecordBytes bounds the owner record a sweep reads.
const maxRecordBytes = 4 << 10

// Record is what a directory's owner record holds.
type Record struct {
	Owner
	Created time.Time `json:"created"`
	// Keep, when set, says why the directory must outlive its owner (it
	// holds what exists nowhere else): a sweep reports it with this reason
	// and never removes it.
	Keep string `json:"keep,omitempty"`
}

// WriteRecord (re)places dir's owner record (0600) atomically, so that a
// sweep reads the old record or the new one.
func WriteRecord(dir string, r Record) error {
	if r.Created.IsZero() {
		r.Created = time.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, RecordFile), b, 0o600)
}

// Sweep finds the directories named Prefix* in Dir whose owner is gone.
type Sweep struct {
	// Dir is where the directories are.
	Dir string
	// Prefix starts their names.
	Prefix string
	// Policy judges an owner (its zero fields filled in with
	// [Policy.Defaults] by the caller).
	Policy Policy
	// Unrecorded judges a directory without a readable record by its
	// modification time (owner unknown); false leaves such a directory
	// alone, as one that is not the sweeper's.
	Unrecorded bool
	// DryRun lists leftovers without removing them.
	DryRun bool
}

// Found is a directory a [Sweep] counts as left over.
type Found struct {
	// Path is the directory.
	Path string
	// Owner is its recorded owner (zero when there is no record).
	Owner Owner
	// Reason says why it counts as left over (and, for a kept one, why it
	// stays).
	Reason string
	// Kept is set for a directory whose record says to keep it.
	Kept bool
	// Removed is set when the sweep removed it.
	Removed bool
}

// Run lists s.Dir and removes (unless s.DryRun) every directory of the
// prefix whose owner is gone. Only directories that belong to this user
// are considered (a link, or another user's directory, is never touched),
// the record is read and the directory removed without following links,
// and a directory whose record says to keep it is reported, not removed.
// It returns every leftover found; errors (listing s.Dir, removals) are
// joined.
func (s Sweep) Run(ctx context.Context) ([]Found, error) {
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	var out []Found
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if !strings.HasPrefix(e.Name(), s.Prefix) || !e.IsDir() {
			continue // a link (or anything else) is never followed
		}
		fi, err := root.Lstat(e.Name())
		if err != nil || !fi.IsDir() {
			continue
		}
		if uid, _, ok := safefs.Owner(fi); !ok || uid != os.Geteuid() {
			continue
		}
		f := Found{Path: filepath.Join(s.Dir, e.Name())}
		last := time.Time{}
		rec, ok := readRecord(root, e.Name())
		switch {
		case ok:
			f.Owner, last = rec.Owner, rec.Created
			if last.IsZero() {
				last = fi.ModTime()
			}
		case s.Unrecorded:
			last = fi.ModTime()
		default:
			continue // not the sweeper's
		}
		var left bool
		if f.Reason, left = s.Policy.Leftover(f.Owner, last, "it"); !left {
			continue
		}
		if rec.Keep != "" {
			f.Kept = true
			f.Reason += "; kept: " + rec.Keep
		} else if !s.DryRun {
			if err := safefs.RemoveAllIn(root, e.Name()); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", f.Path, err))
			} else {
				f.Removed = true
			}
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}

// readRecord reads the owner record of the directory name of root: a
// regular file, bounded, reached through no link.
func readRecord(root *os.Root, name string) (Record, bool) {
	dir, err := safefs.OpenDirIn(root, name, false)
	if err != nil {
		return Record{}, false
	}
	defer dir.Close()
	f, _, err := safefs.OpenIn(dir, RecordFile)
	if err != nil {
		return Record{}, false
	}
	defer f.Close()
	b, err := safefs.ReadAllMax(f, maxRecordBytes)
	if err != nil {
		return Record{}, false
	}
	var r Record
	if json.Unmarshal(b, &r) != nil {
		return Record{}, false
	}
	return r, true
}
