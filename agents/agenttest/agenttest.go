// Package agenttest holds a test-only agent, "parrot", declared the way a
// real CLI is: one adapter (in this folder) and one registry row ([Row]).
// Tests register it to check that everything agent-specific is derived
// from the row and the adapter: help texts, the gateway's upstreams, the
// reserved relocation variables and the bootstrap pin. The CLI does not
// exist; nothing here runs a process.
package agenttest

import (
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
)

// What the parrot row and adapter declare.
const (
	// Name is the agent's and the CLI's name.
	Name = "parrot"
	// Version is the pinned version.
	Version = "3.1.4"
	// Launcher is the npm package a person installs it with.
	Launcher = "@parrot-test/parrot"
	// Upstream is the model API the CLI calls by default.
	Upstream = "https://api.parrot.example"
	// BaseURLVar points the CLI at another endpoint.
	BaseURLVar = "PARROT_BASE_URL"
	// HomeVar moves the CLI's home-relative files.
	HomeVar = "PARROT_HOME"
	// Integrity is the pin of every platform (the SHA-512 of nothing).
	Integrity = "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="
)

// CLI is the parrot's catalog row: a native executable in per-platform npm
// packages, as Claude Code ships.
func CLI() *bootstrap.Row {
	src := map[bootstrap.Platform]bootstrap.Source{}
	for _, p := range []bootstrap.Platform{bootstrap.LinuxX64, bootstrap.LinuxARM64, bootstrap.HostPlatform()} {
		src[p] = bootstrap.Source{Package: Launcher + "-" + string(p), Integrity: Integrity}
	}
	return &bootstrap.Row{Name: Name, Version: Version, Bin: Name, Launcher: Launcher,
		Members: []bootstrap.Member{{From: "package/" + Name, To: Name}}, VersionLine: "parrot %s", Sources: src}
}

// Row is the parrot's registry row.
func Row() agents.Agent {
	return agents.Agent{Name: Name, New: func() adapters.Adapter { return New() }, CLI: CLI(), Default: true}
}

// Registry is the built-in registry plus the parrot.
func Registry() *agents.Registry {
	r := agents.Builtin()
	if err := r.Register(Row()); err != nil {
		panic(err)
	}
	return r
}

// Adapter is the parrot's adapter: it repeats the prompt.
type Adapter struct{}

// New returns the adapter.
func New() *Adapter { return &Adapter{} }

// Name implements [adapters.Adapter].
func (a *Adapter) Name() string { return Name }

// Binary implements [adapters.Adapter].
func (a *Adapter) Binary() string { return Name }

// Capabilities implements [adapters.Adapter].
func (a *Adapter) Capabilities() adapters.Capabilities { return adapters.Capabilities{} }

// Request implements [adapters.Adapter]: `parrot PROMPT`.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	return sandbox.Command{Args: []string{Name, in.Prompt}}, nil
}

// NewDecoder implements [adapters.Adapter]: every line is the answer.
func (a *Adapter) NewDecoder() adapters.Decoder { return decoder{} }

// Quota implements [adapters.Adapter].
func (a *Adapter) Quota(string, time.Time) (bool, time.Time) { return false, time.Time{} }

// Unavailable implements [adapters.Adapter].
func (a *Adapter) Unavailable(string) (string, bool) { return "", false }

// Auth implements [adapters.Adapter].
func (a *Adapter) Auth(string) (string, bool) { return "", false }

// Upstreams implements [adapters.Upstreamer].
func (a *Adapter) Upstreams(vars map[string]string) []string {
	if v := vars[BaseURLVar]; v != "" {
		return []string{Upstream, v}
	}
	return []string{Upstream}
}

// RelocationVars implements [adapters.Relocator].
func (a *Adapter) RelocationVars() []string { return []string{HomeVar} }

type decoder struct{}

func (decoder) Decode(line []byte) []adapters.Event {
	return []adapters.Event{{Kind: adapters.KindText, Text: string(line)}}
}
