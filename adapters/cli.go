package adapters

import "github.com/outpost-dev/outpost/outposterr"

// CLI is what every built-in CLI adapter shares: its name, the program
// argv[0] runs, the extra arguments a caller appends to every command, its
// [Capabilities], and the [Recognizer] of the CLI's failure texts. An
// adapter embeds it, which gives it Name, Binary, Capabilities, Quota,
// Unavailable, Auth and RecognizeFailure, and is built with [Build] and the
// options [WithBinary] and [WithArgs] (plus its own). Once built it does not change, so the adapter stays immutable and
// safe for concurrent use.
type CLI struct {
	*Recognizer
	name   string
	binary string
	extra  []string
	caps   Capabilities
}

// Name returns the adapter's short, stable name.
func (c *CLI) Name() string { return c.name }

// Binary returns the program name or path argv[0] uses (the name unless
// [WithBinary] changed it).
func (c *CLI) Binary() string { return c.binary }

// Capabilities says what the CLI can do.
func (c *CLI) Capabilities() Capabilities { return c.caps }

// AppendExtra appends the caller's extra arguments to args.
func (c *CLI) AppendExtra(args []string) []string { return append(args, c.extra...) }

func (c *CLI) cli() *CLI { return c }

// embedsCLI is a pointer to an adapter type A that embeds [CLI].
type embedsCLI[A any] interface {
	*A
	cli() *CLI
}

// builtCLI is an embedsCLI that implements [Adapter]: [Build] builds
// nothing else.
type builtCLI[A any] interface {
	embedsCLI[A]
	Adapter
}

// Option configures an adapter of type A while [Build] builds it. An
// adapter package names its instance (type Option = adapters.Option[Adapter]).
type Option[A any] func(*A)

// WithBinary sets the program name or path argv[0] uses.
func WithBinary[A any, P embedsCLI[A]](name string) Option[A] {
	return func(a *A) { P(a).cli().binary = name }
}

// WithArgs appends extra arguments to every command, after the adapter's
// own. They are the caller's responsibility.
func WithArgs[A any, P embedsCLI[A]](args ...string) Option[A] {
	return func(a *A) {
		c := P(a).cli()
		c.extra = append(c.extra, args...)
	}
}

// Build returns a new [Adapter] of the CLI named name (also its default
// program) that can do what caps says and reads failures with r, with opts
// applied in order. Options
// append to slices the new adapter owns, so no two adapters share one.
func Build[A any, P builtCLI[A]](name string, caps Capabilities, r *Recognizer, opts ...Option[A]) *A {
	a := new(A)
	*P(a).cli() = CLI{Recognizer: r, name: name, binary: name, caps: caps}
	for _, o := range opts {
		o(a)
	}
	return a
}

// ConfigError is the configuration error of agent name: the message is
// prefixed with the name and the details name the agent.
func ConfigError(name, format string, args ...any) error {
	return outposterr.New(outposterr.Configuration, name+": "+format, args...).
		With(outposterr.Details{Agent: name})
}
