package docker

import (
	"context"
	"errors"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// The reaper exists because a lease is removed by its owner's Release, and an
// owner can die without running it: kill -9, a crash, a lost CI runner. Such
// containers end by themselves once the engine sees their lifeline close
// (lifeline.go); the reaper removes what that leaves (a container whose
// owner died before it attached, one of an engine that was down, volumes
// and networks). Every Outpost resource
// records which process owns it (pid, host name, process start time), so a
// later `outpost gc` can tell leftovers from resources of runs still going on.

// ReapClient is the part of the engine API the reaper uses.
type ReapClient interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, networkID string) error
}

// DefaultReapGrace is how old a resource owned by another host (whose pid
// cannot be checked here) must be before [Reap] removes it.
const DefaultReapGrace = 24 * time.Hour

// ReapOptions tune [Reap] and [ReapCopies]. The zero value removes leftovers
// of dead owners on this host and foreign ones older than [DefaultReapGrace].
type ReapOptions = sandbox.ReapOptions

// Leftover is a labelled resource found by [Reap].
type Leftover struct {
	// Kind is "container", "volume" or "network".
	Kind string
	// ID is the resource id (the name for volumes).
	ID      string
	Name    string
	Labels  map[string]string
	Created time.Time
	// Reason says why it counts as left over.
	Reason string
	// Removed is set when Reap removed it (never in a dry run).
	Removed bool
}

// Reap finds Outpost resources ([LabelManaged]) whose owner is gone and
// removes them unless opts.DryRun. Resources of live owners are left alone.
// It returns every leftover found; removal errors are joined, and a resource
// already gone counts as removed.
func Reap(ctx context.Context, cli ReapClient, opts ReapOptions) ([]Leftover, error) {
	pol := policy(opts)
	managed := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	var (
		out  []Leftover
		errs []error
	)

	// keep adds a leftover (ref names it in errors), removed by rm unless
	// this is a dry run; one already gone, or already being removed (a
	// lease's own auto-removal after its runner died), counts as removed.
	keep := func(lo Leftover, ref string, rm func() error) {
		if !opts.DryRun {
			if err := rm(); err != nil && !goingAway(err) {
				errs = append(errs, engineError(err, "remove %s %s", lo.Kind, ref))
			} else {
				lo.Removed = true
			}
		}
		out = append(out, lo)
	}

	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: managed})
	if err != nil {
		return nil, engineError(err, "list containers")
	}
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		lo := Leftover{Kind: "container", ID: c.ID, Name: name, Labels: c.Labels, Created: time.Unix(c.Created, 0)}
		if leftover(&lo, pol) {
			keep(lo, shortID(c.ID), func() error {
				return cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			})
		}
	}

	if vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: managed}); err != nil {
		errs = append(errs, engineError(err, "list volumes"))
	} else {
		for _, v := range vs.Volumes {
			if v == nil {
				continue
			}
			created, _ := time.Parse(time.RFC3339Nano, v.CreatedAt)
			lo := Leftover{Kind: "volume", ID: v.Name, Name: v.Name, Labels: v.Labels, Created: created}
			if leftover(&lo, pol) {
				keep(lo, v.Name, func() error { return cli.VolumeRemove(ctx, v.Name, true) })
			}
		}
	}

	if ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: managed}); err != nil {
		errs = append(errs, engineError(err, "list networks"))
	} else {
		for _, n := range ns {
			lo := Leftover{Kind: "network", ID: n.ID, Name: n.Name, Labels: n.Labels, Created: n.Created}
			if leftover(&lo, pol) {
				keep(lo, n.Name, func() error { return cli.NetworkRemove(ctx, n.ID) })
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, outposterr.Wrap(outposterr.Sandbox, err, "reap")
	}
	return out, nil
}

// policy is how Reap judges owners: opts with the defaults filled in.
func policy(o ReapOptions) procowner.Policy {
	pol := procowner.Policy{Grace: o.Grace, Hostname: o.Hostname, Now: o.Now, Alive: o.Alive}
	pol.Defaults(DefaultReapGrace)
	return pol
}

// leftover decides whether lo has lost its owner and sets lo.Reason.
func leftover(lo *Leftover, pol procowner.Policy) bool {
	o := leasekit.Owner(lo.Labels[LabelOwnerPID], lo.Labels[LabelOwnerHost], lo.Labels[LabelOwnerStart], lo.Labels[LabelOwnerPIDNS])
	var left bool
	lo.Reason, left = pol.Leftover(o, lo.Created, "it")
	return left
}

// goingAway reports whether a removal failed only because the resource is
// gone or the engine is already removing it (Docker answers 409 "removal of
// container … is already in progress" while an auto-removal runs).
func goingAway(err error) bool {
	return cerrdefs.IsNotFound(err) || (cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"))
}
