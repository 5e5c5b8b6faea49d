package cli

import (
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/antigravity"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/outposterr"
)

// agents maps agent names to adapter constructors. Adding a CLI adds a line.
var agents = map[string]func() adapters.Adapter{
	"claude":      func() adapters.Adapter { return claude.New() },
	"antigravity": func() adapters.Adapter { return antigravity.New() },
	"codex":       func() adapters.Adapter { return codex.New() },
	"copilot":     func() adapters.Adapter { return copilot.New() },
}

// agentNames lists the known agents.
func agentNames() string {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// adapterFor returns the adapter named name.
func adapterFor(name string) (adapters.Adapter, error) {
	mk, ok := agents[name]
	if !ok {
		return nil, outposterr.New(outposterr.Configuration, "unknown agent %q (known: %s)", name, agentNames())
	}
	return mk(), nil
}
