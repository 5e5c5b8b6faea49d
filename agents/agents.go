// Package agents is the registry of the agent CLIs Outpost can run. One
// [Agent] row holds everything the rest of Outpost needs to know about an
// agent: how to build its adapter, the golden fixtures `outpost doctor`
// replays, the bootstrap catalog row of its pinned CLI, and whether it can
// run offline against the scripted model server. What else is agent-specific
// the adapter declares through optional interfaces: the model APIs its
// gateway may forward to ([adapters.Upstreamer]) and the variables that move
// its files ([adapters.Relocator]). Everything else derives from the
// registry: the runner's gateway allowlist ([Registry.Upstreams]), the
// reserved variable names ([Registry.RelocationVars]), the bootstrap catalog
// ([Registry.Catalog]; `outpost bootstrap --print`, which
// scripts/install-clis.sh reads), and the help texts of run, batch,
// bootstrap, image, doctor, init and stub-model. Adding a CLI is one adapter
// folder and one row here (today its pins are still written in the
// bootstrap package's default catalog, which the row refers to);
// package agenttest declares a test-only agent that way.
//
// Spec-defined drivers (.outpost/drivers/<id>.json) register into the same
// table with [Registry.LoadDrivers]; a driver never shadows a built-in agent.
package agents

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/antigravity"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/adapters/driver"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Agent is one row of the registry.
type Agent struct {
	// Name is what users type (--agent, a batch job's "agent").
	Name string
	// New returns a fresh adapter. Adapters are cheap values.
	New func() adapters.Adapter
	// Fixtures holds the agent's golden fixtures as testdata/<case>/…
	// (package adapters/golden); nil when it has none.
	Fixtures fs.FS
	// CLI is the catalog row of the pinned CLI Outpost installs; nil when
	// the agent's binary comes from elsewhere (a driver, a test double).
	CLI *bootstrap.Row
	// Default marks the agents `outpost bootstrap` fetches without arguments.
	Default bool
	// Driver is the spec of a spec-defined driver; nil for built-ins.
	Driver *driver.Spec
}

// Offline reports whether the agent can be pointed at a custom model
// endpoint (the scripted server of --offline, a gateway).
func (a Agent) Offline() bool {
	_, err := OfflineCommand(a.New(), adapters.Endpoint{BaseURL: "http://127.0.0.1:1", APIKey: "x"})
	return err == nil
}

// OfflineCommand is the command the adapter builds to run against
// endpoint: its argv and environment are what a user needs to point the CLI
// at that endpoint by hand (outpost stub-model prints them).
func OfflineCommand(a adapters.Adapter, endpoint adapters.Endpoint) (sandbox.Command, error) {
	return a.Request(adapters.Input{Prompt: "-", Endpoint: &endpoint})
}

// Registry maps agent names to rows. It is safe for concurrent use.
type Registry struct {
	mu   sync.RWMutex
	rows map[string]Agent
}

// New returns an empty registry.
func New() *Registry { return &Registry{rows: map[string]Agent{}} }

// Builtin returns a registry holding the agents Outpost ships adapters for.
func Builtin() *Registry {
	r := New()
	cat := bootstrap.DefaultCatalog()
	row := func(name string) *bootstrap.Row {
		if rw, ok := cat.Row(name); ok {
			return &rw
		}
		return nil
	}
	for _, a := range []Agent{
		{Name: "claude", New: func() adapters.Adapter { return claude.New() }, Fixtures: claude.Fixtures, CLI: row("claude"), Default: true},
		{Name: "codex", New: func() adapters.Adapter { return codex.New() }, Fixtures: codex.Fixtures, CLI: row("codex"), Default: true},
		{Name: "copilot", New: func() adapters.Adapter { return copilot.New() }, Fixtures: copilot.Fixtures, CLI: row("copilot"), Default: true},
		{Name: "antigravity", New: func() adapters.Adapter { return antigravity.New() }, Fixtures: antigravity.Fixtures, CLI: row("agy")},
	} {
		if err := r.Register(a); err != nil {
			panic(err) // the built-in table is wrong: a bug caught by every test
		}
	}
	return r
}

// Register adds a row. A row needs a name and a constructor; a name already
// registered is refused.
func (r *Registry) Register(a Agent) error {
	if a.Name == "" || a.New == nil {
		return outposterr.New(outposterr.Configuration, "agent row needs a name and a constructor")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.rows[a.Name]; dup {
		return outposterr.New(outposterr.Configuration, "agent %q is already registered", a.Name)
	}
	r.rows[a.Name] = a
	return nil
}

// Lookup returns the row named name.
func (r *Registry) Lookup(name string) (Agent, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.rows[name]
	return a, ok
}

// Adapter returns a new adapter for the agent named name, or a
// configuration error listing the known names.
func (r *Registry) Adapter(name string) (adapters.Adapter, error) {
	a, ok := r.Lookup(name)
	if !ok {
		return nil, outposterr.New(outposterr.Configuration, "unknown agent %q (known: %s)", name, r.describe())
	}
	return a.New(), nil
}

// All returns every row, sorted by name.
func (r *Registry) All() []Agent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Agent, 0, len(r.rows))
	for _, a := range r.rows {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Agent) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Names returns every agent name, sorted.
func (r *Registry) Names() []string {
	var out []string
	for _, a := range r.All() {
		out = append(out, a.Name)
	}
	return out
}

// Upstreams is the model gateway's allowlist for the registered agents:
// the union of every [adapters.Upstreamer]'s upstreams given the project's
// variables vars, in registry order, without repeats.
func (r *Registry) Upstreams(vars map[string]string) []string {
	var out []string
	for _, a := range r.All() {
		if u, ok := a.New().(adapters.Upstreamer); ok {
			for _, up := range u.Upstreams(vars) {
				if !slices.Contains(out, up) {
					out = append(out, up)
				}
			}
		}
	}
	return out
}

// RelocationVars lists, sorted and without repeats, the variables any
// registered agent's CLI reads to move its files ([adapters.Relocator]):
// the host's values locate login files; a project may set none of them.
func (r *Registry) RelocationVars() []string {
	var out []string
	for _, a := range r.All() {
		if rl, ok := a.New().(adapters.Relocator); ok {
			out = append(out, rl.RelocationVars()...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Catalog is the bootstrap catalog of the registered agents' pinned CLIs
// (every row's CLI): what `outpost bootstrap` and run install.
func (r *Registry) Catalog() (bootstrap.Catalog, error) {
	var rows []bootstrap.Row
	for _, a := range r.All() {
		if a.CLI != nil {
			rows = append(rows, *a.CLI)
		}
	}
	return bootstrap.NewCatalog(rows...)
}

func (r *Registry) describe() string {
	s := ""
	for i, n := range r.Names() {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s + ", or a driver in " + driver.Dir
}

// DriverResult is what loading one driver file gave.
type DriverResult struct {
	// Path is the driver file.
	Path string
	// Agent is the registered row, when the file loaded.
	Agent *Agent
	// Err says why the file was not registered: invalid, or an id that a
	// built-in agent already has.
	Err error
}

// LoadDrivers registers every valid spec-defined driver of the project at
// root (.outpost/drivers/*.json, each read once) and reports each file. A
// driver whose id is already registered is reported and skipped. The error
// is for the directory as a whole (unreadable); a missing directory holds
// no drivers.
func (r *Registry) LoadDrivers(root string) ([]DriverResult, error) {
	files, err := driver.LoadDir(root)
	if err != nil {
		return nil, err
	}
	out := make([]DriverResult, 0, len(files))
	for _, f := range files {
		res := DriverResult{Path: f.Path, Err: f.Err}
		if f.Err == nil {
			spec := f.Spec
			a := Agent{Name: spec.ID, New: func() adapters.Adapter { return driver.New(spec) }, Driver: spec}
			if err := r.Register(a); err != nil {
				res.Err = fmt.Errorf("id %q is a built-in agent or another driver's; the driver would never run", spec.ID)
			} else {
				res.Agent = &a
			}
		}
		out = append(out, res)
	}
	return out, nil
}
