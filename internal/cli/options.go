package cli

import (
	"fmt"
	"math"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/sandbox"
)

// RunOptions are the flags of `outpost run` (and resume, fork, batch), in
// groups: what to run, where, with which credentials, what to print, where
// conversations go, and the offline scripted server.
type RunOptions struct {
	IO          IOStreams
	Turn        TurnOptions
	Sandbox     SandboxOptions
	Credentials CredentialOptions
	Output      OutputOptions
	Store       StoreOptions
	Offline     OfflineOptions
	Bootstrap   BootstrapOptions
	// Pool is how many leases the runner keeps warm (batch --pool; 0:
	// none).
	Pool int
	// SSHIdentity lets git fetch jobs' sources over ssh with the user's
	// SSH identity (batch --allow-ssh-identity).
	SSHIdentity bool
}

// TurnOptions say what to run.
type TurnOptions struct {
	Agent, Model, Effort string
	// Resume is the conversation to continue; Fork continues it as a new one.
	Resume string
	Fork   bool
	// Prompt is the argument ("-": standard input).
	Prompt string
	// Schema is a JSON Schema file for a typed response.
	Schema string
	// Live delivers standard input lines into the running turn.
	Live   bool
	Reseed bool
	// Timeout and IdleTimeout bound the turn.
	Timeout, IdleTimeout time.Duration
	// MaxCostUSD caps the turn's cost (run --max-cost-usd; 0: none).
	MaxCostUSD float64
}

// SandboxOptions say where a turn runs.
type SandboxOptions struct {
	// Kind is the --sandbox name ("": the default).
	Kind      string
	Workspace string
	Image     string
	Network   string
	User      string
	// Settings are the kinds' own flags by name (sandbox.Kind.Flags).
	Settings map[string]*string
	// CPUs, Memory and Pids limit each container lease (--cpus, --memory,
	// --pids-limit; 0: no limit). Unset flags keep the documented defaults.
	CPUs   float64
	Memory string
	Pids   int64
	// changed reports whether a flag was given (nil: none was).
	changed func(name string) bool
}

// CredentialOptions say how the CLI authenticates and what it may see.
type CredentialOptions struct {
	Auth string
	Env  []string
	// Secret names variables whose values are replaced in all output.
	Secret []string
	MCP    string
	// Mode is where a bridgeable credential goes: "gateway", "inside" or
	// "" (gateway where the sandbox can reach it).
	Mode string
}

// OutputOptions say what is printed.
type OutputOptions struct {
	JSON    bool
	Verbose bool
	// Out is a run directory to record into (runrec): trajectories,
	// results, patches and a manifest, for `outpost report`.
	Out string
}

// StoreOptions say where conversations are kept.
type StoreOptions struct {
	Dir     string
	NoStore bool
}

// OfflineOptions configure the in-process scripted model server.
type OfflineOptions struct {
	Enabled  bool
	Scenario string
	Answers  []string
	QuotaIn  time.Duration
}

// addRunFlags registers the flags shared by run, resume, fork and batch.
func addRunFlags(f *Factory, cmd *cobra.Command, o *RunOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.Turn.Agent, "agent", "", "agent CLI to run ("+builtinNames(f)+", or a driver in .outpost/drivers)")
	fl.StringVar(&o.Turn.Model, "model", "", "model name")
	fl.StringVar(&o.Turn.Effort, "effort", "", "reasoning effort")
	fl.StringVar(&o.Turn.Schema, "schema", "", "JSON Schema file: the answer must be one JSON value matching it (validated; one repair turn; printed as the outcome's value)")
	fl.BoolVar(&o.Turn.Reseed, "reseed", false, "when the CLI cannot find the conversation to continue, retry once in a new one seeded with the stored transcript")
	fl.DurationVar(&o.Turn.Timeout, "timeout", harness.DefaultDeadline, "turn deadline")
	fl.DurationVar(&o.Turn.IdleTimeout, "idle-timeout", harness.DefaultIdleTimeout, "fail when the CLI prints nothing for this long")

	fl.StringVar(&o.Sandbox.Workspace, "workspace", "", "workspace directory (default: the current directory)")
	addSandboxFlags(f, cmd, &o.Sandbox)

	fl.StringVar(&o.Credentials.Auth, "auth", "", "authentication: account (host login file), account:variable, usage (API key) or none; default none with --offline, else required")
	fl.StringArrayVar(&o.Credentials.Env, "env", nil, "forward this environment variable into the sandbox (repeatable; names only)")
	fl.StringArrayVar(&o.Credentials.Secret, "secret", nil, "a declared or forwarded variable whose value is a secret: replaced by [REDACTED] in everything shown or kept (repeatable; names only; names with KEY, TOKEN, SECRET, PASSWORD… already are)")
	fl.StringVar(&o.Credentials.Mode, "credentials", "", "where an API key or token goes: gateway (kept outside the sandbox by Outpost's model gateway; the default where the sandbox can reach it) or inside (installed in the lease); login files always go inside")
	fl.StringVar(&o.Credentials.MCP, "mcp", "", "JSON file declaring MCP servers ({\"servers\":[{\"name\",\"command\"|\"url\",…}]}); secrets as ${NAME} references")

	fl.BoolVar(&o.Output.JSON, "json", false, "print JSON lines: every event, then the outcome")
	fl.BoolVarP(&o.Output.Verbose, "verbose", "v", false, "debug logs on stderr")
	fl.StringVar(&o.Output.Out, "out", "", "record the run into this directory (trajectories, results, patches, a manifest) for outpost report")

	fl.StringVar(&o.Store.Dir, "store", "", "conversation store directory (default: "+defaultStoreHelp+")")
	fl.BoolVar(&o.Store.NoStore, "no-store", false, "do not capture or restore the conversation")

	fl.BoolVar(&o.Offline.Enabled, "offline", false, "run against the in-process scripted model server")
	fl.StringVar(&o.Offline.Scenario, "scenario", "ok", "scripted server scenario for --offline")
	fl.StringArrayVar(&o.Offline.Answers, "stub-answer", nil, "with --offline: the scripted server's next answers, in order (repeatable)")
	fl.DurationVar(&o.Offline.QuotaIn, "stub-quota-reset", 0, "with --offline: quota failures reset this long from now (default: next midnight UTC)")

	fl.StringVar(&o.Bootstrap.Registry, "registry", "", "npm registry for bootstrapping the CLI (default: "+registryEnv+", then npm's configuration)")
	fl.StringVar(&o.Bootstrap.Mirror, "cli-mirror", "", "directory of CLI archives to bootstrap from instead of the network ("+mirrorEnv+")")
}

// addSandboxFlags registers the flags choosing the sandbox and its leases'
// image, network, user and limits (run, batch, grade).
func addSandboxFlags(f *Factory, cmd *cobra.Command, o *SandboxOptions) {
	fl := cmd.Flags()
	usage := "sandbox: " + f.sandboxNames()
	if _, ok := f.Sandboxes[outpost.DefaultSandbox]; ok {
		usage += " (default " + outpost.DefaultSandbox + ")"
	}
	fl.StringVar(&o.Kind, "sandbox", "", usage)
	fl.StringVar(&o.Image, "image", "", "container image (default: the Outpost base image)")
	fl.StringVar(&o.Network, "network", "", "container network mode: none, bridge, host or a network name")
	o.Settings = addKindFlags(f, fl, false)
	fl.StringVar(&o.User, "user", "", "container lease user uid:gid, never root (default: yours; as root, the workspace owner's, else 1000:1000 on a copy of a root-owned workspace, written back at release)")
	fl.Float64Var(&o.CPUs, "cpus", sandbox.DefaultCPUs, "CPU quota of each container lease, in CPUs (0: no limit)")
	fl.StringVar(&o.Memory, "memory", units.BytesSize(float64(sandbox.DefaultMemoryBytes)), "memory limit of each container lease, swap disabled, e.g. 512m, 8g (0: no limit)")
	fl.Int64Var(&o.Pids, "pids-limit", sandbox.DefaultPids, "processes and threads of each container lease (0: no limit)")
	o.changed = fl.Changed
}

// Bounds of the limit flags past which a value is a typo, not a machine:
// the engine would take them and apply no limit at all.
const (
	maxMemory = 1 << 50 // 1 PiB
	maxCPUs   = 4096
	// minTimeout is the shortest --timeout and --idle-timeout.
	minTimeout = 100 * time.Millisecond
)

// limits turns the limit flags into the library's values: an unset flag is
// 0 (the default), an explicit 0 is sandbox.NoLimit; negative values are
// usage errors. (The host sandbox refuses any limit: it cannot enforce one.)
func (o SandboxOptions) limits() (cpus, mem, pids sandbox.Limit, err error) {
	changed := func(name string) bool { return o.changed != nil && o.changed(name) }
	if changed("cpus") {
		switch {
		case o.CPUs < 0 || math.IsNaN(o.CPUs) || math.IsInf(o.CPUs, 0):
			return 0, 0, 0, &flagError{fmt.Errorf("--cpus must be a number of CPUs, 0 for no limit, not %v", o.CPUs)}
		case o.CPUs > maxCPUs:
			return 0, 0, 0, &flagError{fmt.Errorf("--cpus %v is more than any machine has (at most %d; 0 for no limit)", o.CPUs, maxCPUs)}
		case o.CPUs == 0:
			cpus = sandbox.NoLimit
		default:
			cpus = sandbox.Limit(o.CPUs)
		}
	}
	if changed("memory") {
		n, perr := units.RAMInBytes(o.Memory)
		switch {
		case perr != nil || n < 0:
			return 0, 0, 0, &flagError{fmt.Errorf("--memory must be a size such as 512m or 8g, 0 for no limit, not %q", o.Memory)}
		case n == 0:
			mem = sandbox.NoLimit
		case n < 6<<20:
			return 0, 0, 0, &flagError{fmt.Errorf("--memory %s is below the engine's minimum of 6 MiB", o.Memory)}
		case n > maxMemory:
			return 0, 0, 0, &flagError{fmt.Errorf("--memory %s is more than any machine has (at most %s; 0 for no limit)", o.Memory, units.BytesSize(maxMemory))}
		default:
			mem = sandbox.Limit(n)
		}
	}
	if changed("pids-limit") {
		switch {
		case o.Pids < 0:
			return 0, 0, 0, &flagError{fmt.Errorf("--pids-limit must be a number of processes, 0 for no limit, not %d", o.Pids)}
		case o.Pids == 0:
			pids = sandbox.NoLimit
		default:
			pids = sandbox.Limit(o.Pids)
		}
	}
	return cpus, mem, pids, nil
}
