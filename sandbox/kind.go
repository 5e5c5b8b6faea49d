package sandbox

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Kind is one row of the sandbox kind registry.
type Kind struct {
	// Name is the kind's name (--sandbox NAME).
	Name string
	// Summary is one line for help texts.
	Summary string
	// Flags are the kind's own settings, beside [Common]'s: each is a
	// command-line flag of run (and of gc when Flag.Reap is set), its
	// value found in Config.Settings under its name.
	Flags []Flag
	// Open connects to the kind's engine, once per runner.
	Open func(ctx context.Context, c Config) (Engine, error)
	// Doctor checks the kind's engine for `outpost doctor` (nil: nothing
	// to check).
	Doctor func(ctx context.Context, c DoctorConfig) []Check
	// Reap removes what runs that died left behind, for `outpost gc` (nil:
	// nothing is ever left).
	Reap func(ctx context.Context, c ReapConfig) ([]Leftover, error)
	// ReapDefault sweeps the kind on a plain `outpost gc`; other kinds are
	// swept when gc names them (--sandbox NAME).
	ReapDefault bool
	// ReapHelp says what Reap removes, for gc's help: a phrase ("pods and
	// Secrets in every namespace the kubeconfig may list").
	ReapHelp string
	// GatewayHelp says, for doctor, which of the kind's leases a model
	// gateway keeps API keys and tokens out of (--credentials gateway),
	// given whether a gateway binary is at hand (Config.GatewayBinary): a
	// phrase naming them ("kubernetes pods (a gateway sidecar)"), "" for
	// none. Nil: every lease of the kind.
	GatewayHelp func(binary bool) string
	// TaskImages builds the images of tasks' environments for the kind's
	// leases and removes them (outpost batch, gc --images); nil when the
	// kind runs no image.
	TaskImages TaskImages
}

// TaskImages builds and removes task images: images built from a task's
// Dockerfile (a batch job's environment) for a kind's leases, on the
// engine that kind's leases take their images from.
type TaskImages interface {
	// Ensure returns the tag of the image built from contextDir's
	// dockerfile, building it only when no image of that content exists
	// (built: it was built now), printing the build's output to out.
	// version is the outpost version that labels it.
	Ensure(ctx context.Context, getenv func(string) string, contextDir, dockerfile, version string, out io.Writer) (tag string, built bool, err error)
	// Remove removes the task images (dryRun: lists them).
	Remove(ctx context.Context, getenv func(string) string, dryRun bool) ([]Leftover, error)
}

// Flag is a kind's own string setting.
type Flag struct {
	// Name is the flag's name without dashes, and the key of its value in
	// Config.Settings.
	Name string
	// Usage is the flag's help text (the outpost command prefixes it with
	// the kinds that take the flag).
	Usage string
	// Reap makes it a flag of gc too.
	Reap bool
}

// Kinds is a registry of sandbox kinds by name.
type Kinds map[string]Kind

// DefaultKind is the kind used when none is named.
const DefaultKind = "docker"

// BakedGateway is where an image bakes the outpost executable in (outpost
// image build --with-gateway), for a gateway sidecar that runs it from the
// image instead of a copy per lease.
const BakedGateway = "/opt/outpost/gateway/outpost"

// BakedSumSuffix names the stamp next to a baked executable: the file
// BakedGateway+BakedSumSuffix holds its SHA-256 (hex), written when the
// image is built, so a sidecar need not hash the executable in the pod.
const BakedSumSuffix = ".sha256"

// Names lists the kinds, sorted.
func (t Kinds) Names() []string {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Sorted returns the rows, sorted by name.
func (t Kinds) Sorted() []Kind {
	out := make([]Kind, 0, len(t))
	for _, n := range t.Names() {
		out = append(out, t[n])
	}
	return out
}

// Lookup returns the kind named name ("": [DefaultKind]), or a
// configuration error listing the kinds.
func (t Kinds) Lookup(name string) (Kind, error) {
	if name == "" {
		name = DefaultKind
	}
	k, ok := t[name]
	if !ok {
		return Kind{}, outposterr.New(outposterr.Configuration, "sandbox must be one of %s, not %q",
			strings.Join(t.Names(), ", "), name)
	}
	return k, nil
}

// Config is what a kind opens an engine with.
type Config struct {
	// Kind is the name the kind was chosen by ("": it is the default).
	Kind string
	// Common are the options every kind takes.
	Common
	// Settings are the kind's own settings by flag name (Kind.Flags).
	Settings map[string]string
	// Getenv is where the kind finds its engine (DOCKER_HOST,
	// KUBECONFIG, ...) and, for the host kind, the environment CLIs get.
	// Nil: nowhere.
	Getenv func(string) string
	// GatewayBinary is a Linux build of the outpost command that a kind
	// may run beside each lease as its model gateway (the kubernetes
	// kind's sidecar; the image's copy at [BakedGateway] when it is this
	// same file). Empty: none.
	GatewayBinary string
	// Version labels the resources the kind creates.
	Version string
	// Logger receives debug logs (nil: none).
	Logger *slog.Logger
}

// Env returns the value of the variable name from Getenv ("" without).
func (c Config) Env(name string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(name)
}

// Common are the options every sandbox kind takes. Zero values are the
// kind's defaults.
type Common struct {
	// Image, Network and User configure isolated leases (User "uid:gid";
	// empty: the workspace owner's when outpost runs as root). Root
	// (uid 0 or gid 0) is refused: leases never run as root.
	Image, Network, User string
	// CPUs (a quota in cores), Memory (bytes, swap disabled) and Pids
	// (processes and threads) limit every isolated lease: unset, the
	// documented defaults ([DefaultCPUs], [DefaultMemoryBytes],
	// [DefaultPids]); a job's own limits (Spec) override them. A kind that
	// limits nothing (the host sandbox) refuses a limit.
	CPUs, Memory, Pids Limit
}

// The default limits of isolated leases (Docker containers, Kubernetes
// pods), the default image and its user.
const (
	DefaultCPUs              = 2.0
	DefaultMemoryBytes int64 = 4 << 30
	DefaultPids        int64 = 1024
	// DefaultImage is the tag of the image built from .outpost/Dockerfile.
	DefaultImage = "outpost/base:dev"
	// DefaultUser is the base image's unprivileged "agent" account.
	DefaultUser = "1000:1000"
)

// MinCPUs is the smallest CPU limit a lease takes: the kernel's smallest
// CFS quota (1 ms per 100 ms period). Below it, engines round a limit to
// none (a Kubernetes limit under 1m is written as 0: no quota at all) or
// refuse it only when the container starts.
const MinCPUs = 0.01

// CheckCPUs refuses a CPU limit (a Spec's, or a provider option's: 0 the
// default, negative none) that no isolated kind applies as asked: NaN,
// infinite, or positive and below [MinCPUs].
func CheckCPUs(cpus float64) error {
	switch {
	case math.IsNaN(cpus) || math.IsInf(cpus, 0):
		return outposterr.New(outposterr.Configuration, "cpu limit %v is not a number of CPUs", cpus)
	case cpus > 0 && cpus < MinCPUs:
		return outposterr.New(outposterr.Configuration, "cpu limit %v is below the smallest a lease takes (%v CPUs)", cpus, MinCPUs)
	}
	return nil
}

// Resources are the CPU, memory and process limits of one lease; zero
// means no limit.
type Resources struct {
	CPUs        float64
	MemoryBytes int64
	Pids        int64
}

// LeaseResources are the limits a lease of spec gets from a provider
// configured with cpus, memory and pids in the providers' encoding (0: the
// default, [DefaultCPUs] and friends; negative: none): the spec's own
// positive values win. Every isolated kind merges and defaults its limits
// here.
func LeaseResources(spec Spec, cpus float64, memory, pids int64) Resources {
	return Resources{CPUs: leaseLimit(spec.CPUs, cpus, DefaultCPUs),
		MemoryBytes: leaseLimit(spec.MemoryBytes, memory, DefaultMemoryBytes),
		Pids:        leaseLimit(spec.Pids, pids, DefaultPids)}
}

func leaseLimit[T int64 | float64](spec, opt, def T) T {
	switch {
	case spec > 0:
		return spec
	case opt < 0:
		return 0
	case opt == 0:
		return def
	}
	return opt
}

// Limit is one resource limit, tri-state: the zero Limit is unset (the
// kind's default), [NoLimit] is none, a positive value is that limit.
type Limit float64

// NoLimit asks for no limit at all.
const NoLimit Limit = -1

// IsSet reports whether the limit says anything (a value or none).
func (l Limit) IsSet() bool { return l != 0 }

// IsNone reports whether no limit is asked for.
func (l Limit) IsNone() bool { return l < 0 }

// Float is the limit in a provider's encoding: 0 the default, negative
// none, else the value.
func (l Limit) Float() float64 {
	if l < 0 {
		return -1
	}
	return float64(l)
}

// Int is Float for whole quantities (bytes, processes).
func (l Limit) Int() int64 {
	if l < 0 {
		return -1
	}
	return int64(math.Round(float64(l)))
}

// Override is a turn's or a job's own image and resource limits over its
// lease's spec. A zero field keeps the spec's (and a zero spec field the
// runner's [Common], else the kind's default: the provider decides that);
// a set image and a positive limit replace it. A turn cannot lift a
// limit: a negative one is refused, not read as [NoLimit].
type Override struct {
	Image       string
	CPUs        float64
	MemoryBytes int64
	Pids        int64
}

// Apply returns spec with o over it, for a lease of the kind named kind.
// A kind that applies neither images nor limits (isolated false: the host
// sandbox) refuses whatever o sets, naming it.
func (o Override) Apply(spec Spec, kind string, isolated bool) (Spec, error) {
	if !isolated {
		var what []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"image " + o.Image, o.Image != ""}, {"cpus", o.CPUs != 0}, {"memory", o.MemoryBytes != 0}, {"pids", o.Pids != 0}} {
			if f.set {
				what = append(what, f.name)
			}
		}
		if len(what) > 0 {
			return spec, outposterr.New(outposterr.Configuration,
				"the %s sandbox cannot apply %s: run in an isolated sandbox (docker, podman or kubernetes)",
				kind, strings.Join(what, ", "))
		}
		return spec, nil
	}
	if o.CPUs < 0 || o.MemoryBytes < 0 || o.Pids < 0 {
		return spec, outposterr.New(outposterr.Configuration, "negative resource limit")
	}
	if o.Image != "" {
		spec.Image = o.Image
	}
	if o.CPUs > 0 {
		spec.CPUs = o.CPUs
	}
	if o.MemoryBytes > 0 {
		spec.MemoryBytes = o.MemoryBytes
	}
	if o.Pids > 0 {
		spec.Pids = o.Pids
	}
	return spec, nil
}

// CheckLimits refuses limits no isolated kind can apply as given: a CPU
// limit [CheckCPUs] refuses, and a memory or pids limit that is NaN,
// infinite or beyond an int64 ([Limit.Int] would turn it into a negative
// number, which providers read as no limit at all).
func (c Common) CheckLimits() error {
	if c.CPUs.IsSet() && !c.CPUs.IsNone() {
		if err := CheckCPUs(float64(c.CPUs)); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name string
		l    Limit
	}{{"memory", c.Memory}, {"pids", c.Pids}} {
		if f := float64(l.l); math.IsNaN(f) || math.IsInf(f, 0) || f >= math.MaxInt64 {
			return outposterr.New(outposterr.Configuration, "%s limit %v is not a usable number", l.name, f)
		}
	}
	return nil
}

// CheckUser refuses a lease user that is root or in the root group.
func (c Common) CheckUser() error {
	if c.User == "" {
		return nil
	}
	uid, gid, ok := strings.Cut(c.User, ":")
	if n, err := strconv.ParseUint(uid, 10, 32); ok && err == nil && n == 0 {
		return outposterr.New(outposterr.Configuration,
			"lease user %q is root: leases never run as root (give a non-zero uid, or make the workspace accessible to the default user)", c.User)
	}
	if n, err := strconv.ParseUint(gid, 10, 32); ok && err == nil && n == 0 {
		return outposterr.New(outposterr.Configuration,
			"lease user %q is in the root group (gid 0), which reaches root's group-readable files: give a non-zero gid", c.User)
	}
	return nil
}

// Engine is an opened sandbox kind: it hands out the provider and lease
// spec of each turn, and says how the agent's CLI and the model gateway
// reach its leases.
type Engine interface {
	// Delivery says how a bootstrapped CLI reaches this engine's leases.
	Delivery() Delivery
	// Lease returns the provider and spec of a turn in workspace (a host
	// directory), with cli (nil: the CLI is not Outpost's to deliver)
	// delivered as Delivery says.
	Lease(cli *CLI, workspace string) (Provider, Spec, error)
	// Gateway says how this engine's leases reach a model gateway.
	Gateway() Route
	// Close releases everything the engine still holds, bounded; it runs
	// also after cancellation.
	Close()
}

// Unnetworked is an [Engine] whose leases cannot take network "none":
// OfflineNetwork names the network that reaches least, for a lease that
// should reach nothing (a verifier's). Engines that do not implement it
// take "none".
type Unnetworked interface {
	OfflineNetwork() string
}

// BasePath is the PATH of a container lease after the CLI's own directory.
const BasePath = "/usr/local/bin:/usr/bin:/bin"

// DeliveryMode is how a verified, bootstrapped CLI reaches leases.
type DeliveryMode string

// The delivery modes.
const (
	// DeliverMount bind-mounts the host cache entry read-only into each
	// lease: nothing is copied (an engine on this machine).
	DeliverMount DeliveryMode = "mount"
	// DeliverCopy copies the verified tree into each lease through the
	// sandbox contract and checks its version (any engine, local or not).
	DeliverCopy DeliveryMode = "copy"
	// DeliverHostPath runs the CLI from the host cache (the host sandbox).
	DeliverHostPath DeliveryMode = "host-path"
)

// Delivery is how a CLI reaches an engine's leases.
type Delivery struct {
	Mode DeliveryMode
	// Dir is where a copied CLI goes in the lease (DeliverCopy; empty:
	// the installer's default).
	Dir string
}

// CLI is a verified CLI in the host cache, as an engine delivers it.
type CLI struct {
	// Mount bind-mounts the cache entry into a lease (DeliverMount).
	Mount Mount
	// LeaseBinDir is the CLI's bin directory as a lease sees the mount.
	LeaseBinDir string
	// HostBinDir is the CLI's bin directory on this machine
	// (DeliverHostPath).
	HostBinDir string
}

// Via is how leases reach a model gateway.
type Via string

// The gateway routes.
const (
	// ViaNone: the leases cannot reach a gateway; credentials go inside.
	ViaNone Via = ""
	// ViaForward: the runner's gateway socket is forwarded onto the
	// lease's own loopback (a [Forward]); the lease needs no network
	// for it, and gets none unless one was asked for.
	ViaForward Via = "forward"
	// ViaLoopback: the lease shares this machine's loopback and reaches
	// the runner's gateway on its TCP listener there.
	ViaLoopback Via = "loopback"
	// ViaSidecar: a gateway runs beside each lease (Route.Sidecar).
	ViaSidecar Via = "sidecar"
)

// Route says how an engine's leases reach a model gateway: a value the
// runner acts on.
type Route struct {
	Via Via
	// Sidecar runs the gateway beside each lease (ViaSidecar).
	Sidecar Sidecars
}

// Sidecars run a program (the model gateway) beside each lease.
type Sidecars interface {
	// WithSidecar returns a provider whose leases run the gateway program
	// with args beside them.
	WithSidecar(args []string) Provider
	// SidecarStreams returns the standard streams of the program beside
	// sb; ok is false when sb has none.
	SidecarStreams(sb Sandbox) (s SidecarStreams, ok bool)
}

// SidecarStreams are the standard streams of a program beside a lease.
type SidecarStreams struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
	// Stderr returns the tail of its standard error.
	Stderr func() string
	// Started, when set, waits until the program runs (the lease may be
	// returned while it is still being started; reads and writes wait
	// for it too) and returns why it could not be started, or ctx's
	// error.
	Started func(ctx context.Context) error
}

// Check is one doctor verdict.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// DoctorConfig is what a kind's doctor checks with.
type DoctorConfig struct {
	// Image is the sandbox image to look for.
	Image string
	// Getenv is where the kind finds its engine.
	Getenv func(string) string
	// Version labels what the check creates.
	Version string
}

// ReapConfig is what a kind's reaping takes.
type ReapConfig struct {
	// Settings are the kind's gc flags (Flag.Reap) by name.
	Settings map[string]string
	// Getenv is where the kind finds its engine.
	Getenv func(string) string
	// DryRun lists leftovers without removing them.
	DryRun bool
	// Grace is the age after which resources of unknown owners count as
	// left over.
	Grace time.Duration
	// Version labels the client.
	Version string
}

// ReapOptions tune a kind's reaper (docker.Reap, kubernetes.Provider.Reap,
// host.Reap, which add their own fields). The zero value removes the
// leftovers of dead owners on this host and those of owners that cannot be
// checked here once they are older than the kind's DefaultReapGrace.
type ReapOptions struct {
	// DryRun lists leftovers without removing them.
	DryRun bool
	// Grace is the age of a resource's last sign of life (its creation,
	// or its heartbeat where the kind keeps one) after which it counts as
	// left over when its owner cannot be checked here (another host, no
	// owner record). Zero: the kind's DefaultReapGrace; negative: never.
	Grace time.Duration
	// Hostname is this host's name as owners record it. Empty: os.Hostname().
	Hostname string
	// Now is the current time. Nil: time.Now.
	Now func() time.Time
	// Alive reports whether pid (with its recorded start time, possibly "")
	// is still the owning process. Nil: a live process with that pid whose
	// start time matches, when one was recorded.
	Alive func(pid int, start string) bool
}

// Leftover is one thing a dead run left behind.
type Leftover struct {
	// What names it for people ("host sandbox /tmp/outpost-lease-1 (owner
	// gone)").
	What string
	// Removed says whether it was removed (false: dry run, or it failed).
	Removed bool
}

// DefaultReapGrace is gc's default age for resources of unknown owners.
const DefaultReapGrace = 24 * time.Hour
