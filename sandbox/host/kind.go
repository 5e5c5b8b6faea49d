package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// Kind is the host sandbox kind: CLIs run on this machine, unisolated, as
// your own processes, with the few variables a program needs from
// Config.Getenv (PATH, LANG, LC_ALL, TMPDIR, TERM; TZ is UTC) and never the
// whole environment, which holds secrets nobody chose to forward.
func Kind() sandbox.Kind {
	return sandbox.Kind{Name: "host", Summary: "this machine, unisolated", Open: open, Reap: reap, ReapDefault: true,
		ReapHelp: "lease directories (" + LeasePrefix + "* in the temporary directory, holding private homes " +
			"with logins and transcripts) of this user"}
}

// hostVars are the variables the host sandbox passes to CLIs.
var hostVars = []string{"PATH", "LANG", "LC_ALL", "TMPDIR", "TERM"}

func open(ctx context.Context, c sandbox.Config) (sandbox.Engine, error) {
	if c.User != "" {
		return nil, outposterr.New(outposterr.Configuration, "a lease user applies to isolated sandboxes; the host sandbox runs as you")
	}
	if err := refuseLimits(c.Common); err != nil {
		return nil, err
	}
	// The leases of runs that died holding them (kill -9, a crash) go
	// now: the directories of dead owners of this host, not those of
	// owners that cannot be judged here (outpost gc waits for their age).
	// It costs a listing of the temporary directory.
	if left, err := Reap(ctx, ReapOptions{ReapOptions: sandbox.ReapOptions{Grace: -1}}); err != nil || len(left) > 0 {
		if c.Logger != nil {
			c.Logger.Debug("removed host leases of dead runs", "count", len(left), "err", err)
		}
	}
	env := map[string]string{"TZ": "UTC"}
	for _, k := range hostVars {
		if v := c.Env(k); v != "" {
			env[k] = v
		}
	}
	return &engine{ctx: ctx, p: New(Options{Env: env, Logger: c.Logger}), env: env}, nil
}

// refuseLimits refuses the resource limits the host sandbox cannot apply,
// naming each flag: it runs the CLI as an ordinary process of yours, and
// the limits a process can set on itself (rlimits) are no fit — the
// process limit counts every process of your user, the address-space
// limit is not a memory limit (a Node.js CLI reserves far more than it
// uses). No limit (sandbox.NoLimit) is what it does anyway.
func refuseLimits(c sandbox.Common) error {
	var flags []string
	for _, l := range []struct {
		flag string
		l    sandbox.Limit
	}{{"--cpus", c.CPUs}, {"--memory", c.Memory}, {"--pids-limit", c.Pids}} {
		if l.l.IsSet() && !l.l.IsNone() {
			flags = append(flags, l.flag)
		}
	}
	if len(flags) == 0 {
		return nil
	}
	return outposterr.New(outposterr.Configuration,
		"the host sandbox cannot apply %s: it runs CLIs unisolated as your own processes and limits nothing; use an isolated sandbox (--sandbox docker, podman or kubernetes), or run without the limit",
		strings.Join(flags, ", "))
}

// engine runs CLIs on this machine.
type engine struct {
	ctx context.Context
	p   *Provider
	env map[string]string
}

func (e *engine) Delivery() sandbox.Delivery {
	return sandbox.Delivery{Mode: sandbox.DeliverHostPath}
}

func (e *engine) Lease(cli *sandbox.CLI, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	spec := sandbox.Spec{Workspace: workspace}
	if cli != nil {
		spec.Env = map[string]string{"PATH": cli.HostBinDir + ":" + e.env["PATH"]}
	}
	return e.p, spec, nil
}

// Gateway: the host sandbox reaches the runner's gateway on loopback TCP.
func (e *engine) Gateway() sandbox.Route { return sandbox.Route{Via: sandbox.ViaLoopback} }

// Close removes the private homes of leases still held: the harness
// releases each lease itself, also after a signal cancelled the run; this
// is the last line of defence. A home left by a process that died anyway
// (kill -9) is removed when the next run opens the host sandbox, or by
// `outpost gc` (Reap).
func (e *engine) Close() {
	_ = leasekit.ReleaseAllWithin(e.ctx, e.p.ReleaseAll, DefaultReleaseTimeout)
}

// reap removes this user's host sandbox homes whose owner is gone.
func reap(ctx context.Context, c sandbox.ReapConfig) ([]sandbox.Leftover, error) {
	left, err := Reap(ctx, ReapOptions{ReapOptions: sandbox.ReapOptions{DryRun: c.DryRun, Grace: c.Grace}})
	out := make([]sandbox.Leftover, 0, len(left))
	for _, l := range left {
		out = append(out, sandbox.Leftover{Removed: l.Removed, What: fmt.Sprintf("host sandbox %s (%s)", l.Path, l.Reason)})
	}
	return out, err
}
