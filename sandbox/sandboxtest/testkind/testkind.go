// Package testkind is a sandbox kind for tests: one package and one
// registry row, as a new kind would be. Its leases are host sandbox leases
// (unisolated) handed out under its own name; it has a flag of its own
// (its value reaches every command as TESTKIND_LABEL), a doctor check
// that reports the image it was asked about, and a reaper that reports
// (and never removes) one leftover naming its gc flag's value.
package testkind

import (
	"context"
	"fmt"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// Name is the kind's name.
const Name = "testkind"

// FlagName is the kind's own flag (--testkind-label), also a gc flag.
const FlagName = "testkind-label"

// Kind returns the kind's registry row.
func Kind() sandbox.Kind {
	return sandbox.Kind{Name: Name, Summary: "a test kind: host leases under another name",
		Flags: []sandbox.Flag{{Name: FlagName, Usage: "a label the test kind reports", Reap: true}},
		Open:  open,
		Doctor: func(_ context.Context, c sandbox.DoctorConfig) []sandbox.Check {
			return []sandbox.Check{{Name: "testkind engine", OK: true, Detail: "image " + c.Image}}
		},
		Reap: func(_ context.Context, c sandbox.ReapConfig) ([]sandbox.Leftover, error) {
			return []sandbox.Leftover{{What: fmt.Sprintf("testkind lease %s (dry run %t)", c.Settings[FlagName], c.DryRun)}}, nil
		},
		ReapHelp: "nothing: one leftover named after --" + FlagName + " is reported",
	}
}

func open(_ context.Context, c sandbox.Config) (sandbox.Engine, error) {
	env := map[string]string{"PATH": c.Env("PATH"), "TZ": "UTC"}
	return &engine{p: &provider{host.New(host.Options{Env: env, Logger: c.Logger})}, env: env,
		label: c.Settings[FlagName]}, nil
}

// provider is a host provider under the kind's name.
type provider struct{ *host.Provider }

func (p *provider) Name() string { return Name }

type engine struct {
	p     *provider
	env   map[string]string
	label string
}

func (e *engine) Delivery() sandbox.Delivery {
	return sandbox.Delivery{Mode: sandbox.DeliverHostPath}
}

func (e *engine) Lease(cli *sandbox.CLI, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	spec := sandbox.Spec{Workspace: workspace, Env: map[string]string{"TESTKIND_LABEL": e.label}}
	if cli != nil {
		spec.Env["PATH"] = cli.HostBinDir + ":" + e.env["PATH"]
	}
	return e.p, spec, nil
}

func (e *engine) Gateway() sandbox.Route { return sandbox.Route{Via: sandbox.ViaLoopback} }

func (e *engine) Close() { _ = e.p.ReleaseAll(context.Background()) }
