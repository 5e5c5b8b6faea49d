package cli

import (
	"os"
	"strings"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/outposterr"
)

// builtinNames lists the built-in agents, for help texts.
func builtinNames(f *Factory) string { return strings.Join(f.Agents().Names(), ", ") }

// loadAgents builds the invocation's agent table: the built-in rows plus
// the spec-defined drivers of the project in the current directory.
func loadAgents(f *Factory) (*outpost.AgentTable, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	return outpost.LoadAgents(f.Agents(), root)
}
