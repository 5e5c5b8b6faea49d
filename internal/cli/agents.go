package cli

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/antigravity"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/adapters/driver"
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
	return strings.Join(names, ", ") + ", or a driver in " + driver.Dir
}

// adapterFor returns the adapter named name: a built-in one, else the
// spec-defined driver .outpost/drivers/<name>.json of the project in the
// current directory.
func adapterFor(name string) (adapters.Adapter, error) {
	if mk, ok := agents[name]; ok {
		return mk(), nil
	}
	root, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	s, err := driver.Load(root, name)
	if err == nil {
		return driver.New(s), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return nil, outposterr.New(outposterr.Configuration, "unknown agent %q (known: %s)", name, agentNames())
}
