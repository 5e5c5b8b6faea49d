package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/outposterr"
)

// builtinNames lists the built-in agents, for help texts.
func builtinNames(f *Factory) string { return strings.Join(f.Agents().Names(), ", ") }

// agentTable is the agent registry of one command invocation: the
// built-in rows plus the spec-defined drivers of the project in the
// current directory, each driver file read once.
type agentTable struct {
	reg     *agents.Registry
	drivers []agents.DriverResult
}

// loadAgents builds the invocation's agent table.
func loadAgents(f *Factory) (*agentTable, error) {
	reg := f.Agents()
	root, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	drivers, err := reg.LoadDrivers(root)
	if err != nil {
		return nil, err
	}
	return &agentTable{reg: reg, drivers: drivers}, nil
}

// lookup returns the row named name. A driver file of that name that did
// not load reports its own error.
func (t *agentTable) lookup(name string) (agents.Agent, error) {
	if a, ok := t.reg.Lookup(name); ok {
		return a, nil
	}
	for _, d := range t.drivers {
		if d.Err != nil && filepath.Base(d.Path) == name+".json" {
			return agents.Agent{}, d.Err
		}
	}
	if _, err := t.reg.Adapter(name); err != nil {
		return agents.Agent{}, err
	}
	return agents.Agent{}, outposterr.New(outposterr.Configuration, "unknown agent %q", name)
}
