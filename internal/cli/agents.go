package cli

import (
	"os"
	"strings"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

// builtinNames lists the built-in agents, for help texts.
func builtinNames(f *Factory) string { return strings.Join(f.Agents().Names(), ", ") }

// liveNames lists the built-in agents whose CLI takes live input
// ([adapters.LiveInput]), for help texts.
func liveNames(f *Factory) string {
	var out []string
	for _, a := range f.Agents().All() {
		if _, ok := a.New().(adapters.LiveInput); ok {
			out = append(out, a.Name)
		}
	}
	return strings.Join(out, ", ")
}

// loadAgents builds the invocation's agent table: the built-in rows plus
// the spec-defined drivers of the project in the current directory.
func loadAgents(f *Factory) (*outpost.AgentTable, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	return outpost.LoadAgents(f.Agents(), root)
}
