// Package sandbox defines where a turn's CLI runs: a [Provider] hands out
// [Sandbox] leases, a Sandbox executes [Command]s as [Process]es and moves
// files in and out as tar streams.
//
// Lifecycle: Acquire a lease, Exec any number of commands in it (a warm
// session reuses one lease for many turns), then Release it. Release is
// idempotent, bounded, and safe to call after cancellation: implementations run
// their cleanup under context.WithoutCancel with their own timeout.
//
// Processes: each command is started in its own process group so that
// [Process.Signal] reaches the CLI and every child it spawned (MCP servers,
// shells). Wait returns when the command's own process exits, never when its
// output pipes close: a grandchild holding stdout open must not hang a turn.
// After Wait, the caller may keep reading Stdout/Stderr for a short drain
// window and then calls Close, which unblocks readers and kills what is left of
// the group.
//
// Environment values travel in the exec environment, never in argv.
//
// Kinds: a sandbox kind is one way to get leases, chosen by name (the
// outpost command's --sandbox NAME). It is one row of a registry ([Kinds];
// package sandbox/kinds holds the built-in ones), made by the package that
// implements it (sandbox/host; sandbox/docker, for docker and podman;
// sandbox/kubernetes): its name, its own flags, how it opens an [Engine],
// its doctor checks and how it reaps what dead runs left ([Kind]). An
// opened kind's Engine says how a bootstrapped CLI reaches its leases
// ([Delivery]), hands out each turn's provider and lease spec, and says
// how its leases reach a model gateway ([Route]). The outpost command
// loops over the registry for help, flags, doctor and gc, and the root
// package's Runner looks the chosen kind up in it, so neither imports a
// kind package and one row adds a kind (sandbox/sandboxtest/testkind is
// one, for tests).
package sandbox

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// Provider acquires sandboxes.
type Provider interface {
	// Name is the provider's short name ("host", "docker").
	Name() string
	// Acquire creates a sandbox for spec. The caller must Release it.
	Acquire(ctx context.Context, spec Spec) (Sandbox, error)
}

// Spec describes the sandbox a turn needs. Zero values mean provider defaults.
type Spec struct {
	// Workspace is the host directory the agent works in. Docker mounts it at
	// /workspace; the host provider runs in it directly. Empty: a fresh
	// temporary directory owned by the lease.
	Workspace string
	// Env is added to every command's environment (Command.Env wins).
	Env map[string]string
	// Labels are attached to every resource the provider creates (run,
	// session); the provider adds its own version label.
	Labels map[string]string
	// Network is the network mode for isolated providers: "none", "bridge",
	// "host" or a named network. Empty: the provider's default.
	Network string
	// Image is the container image for container providers.
	Image string
	// CPUs, MemoryBytes and Pids limit container resources (0: the
	// provider's default — Docker leases and Kubernetes pods are always
	// limited, see docker.DefaultCPUs and kubernetes.DefaultCPUs; a pod's
	// pids limit is its node's, which must equal Pids; negative is
	// refused).
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// User is "uid:gid" for container providers; empty: the host user's ids.
	User string
	// RealHome asks the host provider to use the real home directory instead
	// of a private one (unisolated; for users who want the host's CLI logins).
	RealHome bool
	// Mounts are extra read-only bind mounts (host path -> sandbox path).
	Mounts []Mount
	// Hide lists workspace-relative directories an isolated provider hides
	// from the lease: an empty read-only directory is mounted over each, so
	// the lease can neither read what is there nor create anything there
	// (the outpost command hides the project's .outpost, which holds .env
	// values, drivers and configuration). A missing directory is created
	// empty first; one reached through a link is refused. The host
	// provider, which isolates nothing, ignores it.
	Hide []string
	// Forwards make host unix sockets reachable inside a container sandbox
	// as TCP ports on the sandbox's own loopback (a model gateway for a
	// lease with network "none"). Providers that cannot isolate a loopback
	// (the host provider) refuse them.
	Forwards []Forward
}

// Forward relays 127.0.0.1:Port inside a sandbox to a unix socket on the
// host. Connections stay inside the sandbox's own network namespace: no
// bridge, route or host port is involved.
type Forward struct {
	// Socket is the absolute host path of a listening unix socket.
	Socket string
	// Port is the TCP port on the sandbox's loopback (1..65535).
	Port int
}

// Mount is a bind mount into a container sandbox.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
}

// Sandbox is one lease.
type Sandbox interface {
	// ID identifies the lease (container id, host temp dir name).
	ID() string
	// Exec starts cmd. The returned Process must be Waited and Closed.
	Exec(ctx context.Context, cmd Command) (Process, error)
	// CopyIn extracts the tar stream r under dir (a sandbox path, absolute).
	CopyIn(ctx context.Context, dir string, r io.Reader) error
	// CopyOut returns path (file or directory) as a tar stream whose entries
	// are named relative to path's parent directory.
	CopyOut(ctx context.Context, path string) (io.ReadCloser, error)
	// Home is the private home directory of the CLI inside the sandbox.
	Home() string
	// Root is the workspace directory inside the sandbox.
	Root() string
	// Release removes the lease and everything it owns. Idempotent. When
	// it returns nothing of the lease runs any more; a provider may finish
	// removing what is left in the engine in the background, and then says
	// so and waits for it when it closes (Docker: the stopped container).
	Release(ctx context.Context) error
}

// Command is one process to run in a sandbox. Build it with an argv array,
// never a shell string.
type Command struct {
	// Args is the argv; Args[0] is the program, looked up on the sandbox PATH.
	Args []string
	// Env holds environment variables for the process. Names must match
	// [ValidEnvName]. Values are secret-safe: providers never put them in argv.
	Env map[string]string
	// Dir is the working directory inside the sandbox; empty means Root.
	Dir string
	// Stdin is written to the process's standard input, which is then closed,
	// unless KeepStdinOpen is set.
	Stdin []byte
	// KeepStdinOpen leaves stdin open after Stdin was written; the caller
	// writes more through Process.Stdin and must close it.
	KeepStdinOpen bool
}

// Redacted returns a printable form of the command: argv and variable
// names, never values. Secrets never go in argv; as a second line of
// defence, any value of Env at least [minMasked] bytes long that appears in
// an argument anyway is printed as "…".
func (c Command) Redacted() string {
	names := make([]string, 0, len(c.Env))
	var values []string
	for k, v := range c.Env {
		names = append(names, k)
		if len(v) >= minMasked {
			values = append(values, v)
		}
	}
	sort.Strings(names)
	// Longest first, so a value containing another is masked whole.
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	args := c.Args
	if len(values) > 0 {
		args = make([]string, len(c.Args))
		for i, a := range c.Args {
			for _, v := range values {
				a = strings.ReplaceAll(a, v, "…")
			}
			args[i] = a
		}
	}
	return fmt.Sprintf("argv=%q env=%v dir=%q stdin=%dB", args, names, c.Dir, len(c.Stdin))
}

// minMasked is the shortest environment value Redacted masks in argv
// (shorter ones, "1" or "UTC", are flags, not secrets).
const minMasked = 8

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnvName reports whether name is usable as an environment variable name
// (letters, digits and '_', not starting with a digit).
func ValidEnvName(name string) bool { return envName.MatchString(name) }

// Validate checks the command before launch: a program, valid environment
// variable names, and values without NUL bytes (no environment can hold
// one).
func (c Command) Validate() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return fmt.Errorf("command has no program")
	}
	for k, v := range c.Env {
		if !ValidEnvName(k) {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s holds a NUL byte", k)
		}
	}
	return nil
}

// Process is a running command.
type Process interface {
	// Stdout and Stderr stream the process's output. They reach EOF when every
	// writer closed them, or after Close.
	Stdout() io.Reader
	Stderr() io.Reader
	// Stdin is the live input writer when Command.KeepStdinOpen was set, else nil.
	Stdin() io.WriteCloser
	// Wait blocks until the command's own process exits (not its pipes) and
	// returns its status. It may be called more than once.
	Wait() (ExitStatus, error)
	// Signal sends sig to the command's whole process group.
	Signal(sig syscall.Signal) error
	// Close stops reading output, kills whatever is left of the process
	// group, and frees resources. Idempotent.
	Close() error
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code; -1 when the process was killed by a signal.
	Code int `json:"code"`
	// Signal names the terminating signal ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// OOMKilled is set when the sandbox reports an out-of-memory kill.
	OOMKilled bool `json:"oom_killed,omitempty"`
}

// String renders the status for messages.
func (s ExitStatus) String() string {
	switch {
	case s.OOMKilled:
		return fmt.Sprintf("killed: out of memory (exit %d)", s.Code)
	case s.Signal != "":
		return "killed by " + s.Signal
	}
	return fmt.Sprintf("exit %d", s.Code)
}

// Success reports a zero exit.
func (s ExitStatus) Success() bool { return s.Code == 0 && s.Signal == "" && !s.OOMKilled }

// Resource limits a sandbox may report as reached.
const (
	// LimitPids: the sandbox's limit on processes and threads refused a fork.
	LimitPids = "pids"
	// LimitMemory: the sandbox's memory limit killed a process (an
	// out-of-memory kill; see [ExitStatus.OOMKilled]).
	LimitMemory = "memory"
)

// LimitReporter is implemented by processes whose sandbox can tell, after
// the process ended, whether one of its resource limits refused it
// something: a fork refused at the process limit leaves no trace in the
// exit status (the shell or runtime that failed to fork may exit 0, or the
// rest of the tree may run on until a deadline).
type LimitReporter interface {
	// LimitsReached names the limits the sandbox reached since it last
	// answered (or since it was made): [LimitPids]. Empty when none was or
	// the sandbox cannot tell. It may run a short command in the sandbox,
	// so it is asked about failed processes only, before the sandbox is
	// released.
	LimitsReached(ctx context.Context) []string
}

// Vanishing is implemented by leases that can tell whether they still
// exist: a container removed (docker rm -f), a pod deleted or evicted by
// someone else while a turn ran. The harness asks after a step failed, so
// that a lease that disappeared is a sandbox failure (worth
// retrying in a new lease), not the CLI's or its installation's.
type Vanishing interface {
	// Gone says why the lease no longer exists, or "" while it does, once
	// it was released by its owner, or when it cannot tell.
	Gone(ctx context.Context) string
}

// GoneReason asks sb, or the lease it wraps (a wrapper's Unwrap() Sandbox,
// followed), whether it disappeared: see [Vanishing]. "" when none can tell.
func GoneReason(ctx context.Context, sb Sandbox) string {
	for range 8 {
		if v, ok := sb.(Vanishing); ok {
			return v.Gone(ctx)
		}
		u, ok := sb.(interface{ Unwrap() Sandbox })
		if !ok {
			return ""
		}
		sb = u.Unwrap()
	}
	return ""
}

// Unisolated is implemented by sandboxes that run directly on the host
// machine. Credentials reach such a sandbox as variables only: files and
// login commands would touch the user's own machine.
type Unisolated interface {
	Unisolated() bool
}
