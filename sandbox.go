package outpost

import (
	"path/filepath"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kinds"
)

// SandboxOptions say where a turn runs. Zero values are the kind's
// defaults.
type SandboxOptions struct {
	// Kind is the sandbox kind's name ("": sandbox.DefaultKind, docker).
	Kind string
	// Common are the options every kind takes: image, network, lease user
	// and resource limits (see sandbox.Common). A job's own limits
	// (Turn.CPUs, ...) override them.
	sandbox.Common
	// Settings are the kind's own settings by name (sandbox.Kind.Flags:
	// the kubernetes kind's kubeconfig, context and namespace). A kind
	// finds its engine through Options.Getenv too (DOCKER_HOST,
	// CONTAINER_HOST, KUBECONFIG).
	Settings map[string]string
	// GatewayBinary is a Linux build of the outpost command (the nodes'
	// architecture; static, or linked against the lease image's C library)
	// that runs the model gateway in a sidecar container of each pod
	// (kubernetes kind): the credential then stays out of the lease on any
	// cluster. The outpost command passes itself. Empty: pods on this
	// machine's network use the runner's own gateway, others get the
	// credential inside.
	GatewayBinary string
}

// SandboxKinds returns the built-in sandbox kinds (package sandbox/kinds);
// a runner takes the table, so a test (or another engine) adds one row.
func SandboxKinds() sandbox.Kinds { return kinds.Builtin() }

// DefaultSandbox is the kind used when none is named.
const DefaultSandbox = sandbox.DefaultKind

// Installed is a verified CLI ready for delivery.
type Installed struct {
	Entry *bootstrap.Entry
	// Bootstrapper installs the entry into a lease (copy delivery).
	Bootstrapper *bootstrap.Bootstrapper
}

// forEngine is the CLI as an engine delivers it.
func (c *Installed) forEngine() *sandbox.CLI {
	if c == nil {
		return nil
	}
	return &sandbox.CLI{Mount: c.Entry.Mount(), LeaseBinDir: c.Entry.SandboxBinDir(), HostBinDir: c.Entry.HostBinDir()}
}

// hiddenDirs lists the workspace-relative .outpost directories a lease
// must not see: the workspace's own and, when the project (the current
// directory) lies inside the workspace, the project's. They hold .env
// values, drivers and, maybe, a conversation store. (The host sandbox,
// which isolates nothing, ignores them.)
func hiddenDirs(project, workspace string) []string {
	hide := []string{ConfigDir}
	if project != "" {
		if rel, err := filepath.Rel(workspace, project); err == nil && rel != "." && filepath.IsLocal(rel) {
			hide = append(hide, filepath.ToSlash(filepath.Join(rel, ConfigDir)))
		}
	}
	return hide
}
