// Package cli implements the outpost command: the command tree, flags,
// output and exit codes. It is the only package (with cmd/outpost) that
// prints or reads the process environment; it passes explicit values down to
// the libraries.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/version"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kinds"
)

// Version is the outpost version, declared once in internal/version and
// stamped by the release build.
var Version = version.Version()

// versionText is what `outpost --version` prints: the version on the first
// line, then the commit, the Go toolchain and platform, and the CLI version
// each agent of reg is pinned to.
func versionText(reg *agents.Registry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "outpost %s\ncommit %s\n%s %s/%s\n", Version, version.Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, a := range reg.All() {
		if a.CLI != nil && a.CLI.Version != "" {
			fmt.Fprintf(&b, "%s %s (pinned CLI)\n", a.Name, a.CLI.Version)
		}
	}
	return b.String()
}

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY is true when Out is a terminal (human, colourless live output).
	OutTTY bool
}

// Factory holds what commands need; fallible or expensive things are
// functions so tests can swap them.
type Factory struct {
	IO     IOStreams
	Getenv func(string) string
	Now    func() time.Time
	// Agents returns a fresh registry of the built-in agents; each command
	// invocation adds the project's spec-defined drivers to its own copy.
	Agents func() *agents.Registry
	// Sandboxes are the sandbox kinds --sandbox chooses from.
	Sandboxes sandbox.Kinds
	// Self returns the path of this outpost executable, which runs the
	// model gateway beside Kubernetes leases (nil: no gateway sidecar).
	Self func() (string, error)
}

// NewFactory returns the production factory.
func NewFactory() *Factory {
	return &Factory{
		IO: IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
			OutTTY: term.IsTerminal(int(os.Stdout.Fd()))},
		Getenv:    os.Getenv,
		Now:       time.Now,
		Agents:    agents.Builtin,
		Sandboxes: kinds.Builtin(),
		Self:      os.Executable,
	}
}

// Main runs the outpost command with args and returns the exit code.
// It never calls os.Exit itself.
func Main(args []string) int { return MainWith(NewFactory(), args) }

// cancelSignals end a command the same way: SIGINT (Ctrl-C), SIGTERM (a
// supervisor), SIGHUP (the terminal went away) and SIGQUIT (Ctrl-\, which
// then dumps no goroutines).
var cancelSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// MainWith is [Main] with a factory of the caller's (tests register fake
// agents or sandboxes in it). SIGINT, SIGTERM, SIGHUP and SIGQUIT cancel the
// command's context: running turns stop and their leases are released
// (containers removed, host sandbox homes deleted). An interrupted command
// exits 128 plus the signal's number (130 for SIGINT, 143 for SIGTERM, 129
// for SIGHUP, 131 for SIGQUIT); later signals are ignored while it winds
// down.
func MainWith(f *Factory, args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, cancelSignals...)
	defer signal.Stop(ch)
	var got atomic.Value // syscall.Signal
	go func() {
		select {
		case sig := <-ch:
			if s, ok := sig.(syscall.Signal); ok {
				got.Store(s)
			}
			cancel(fmt.Errorf("received %s", sig))
		case <-ctx.Done():
		}
	}()
	code := Execute(ctx, f, args)
	if s, ok := got.Load().(syscall.Signal); ok && code == int(ExitAborted) {
		return 128 + int(s)
	}
	return code
}

// Execute runs the command tree with f and returns the exit code. A panic
// inside a command is reported as an internal error (exit 11), never as the
// agent's failure.
func Execute(ctx context.Context, f *Factory, args []string) (code int) {
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	defer func() {
		if v := recover(); v != nil {
			err := outposterr.Panic(v)
			printError(f.IO.ErrOut, outposterr.Internal, err)
			code = int(ExitCodeOf(err))
		}
	}()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return int(ExitOK)
	}
	if argCountError.MatchString(err.Error()) && cmd != nil {
		// Cobra's argument count message names no argument: say the usage.
		use, _, _ := strings.Cut(cmd.UseLine(), "\n")
		err = &flagError{fmt.Errorf("%w (usage: %s; see %s --help)", err, strings.TrimSuffix(use, " [flags]"), cmd.CommandPath())}
	}
	var flagErr *flagError
	if errors.As(err, &flagErr) || strings.HasPrefix(err.Error(), "unknown command ") {
		// A typo in a command name is a usage error (cobra has no type for it).
		printError(f.IO.ErrOut, outposterr.Configuration, err)
		return int(ExitConfiguration)
	}
	var silent *silentError
	if !errors.As(err, &silent) {
		printError(f.IO.ErrOut, outposterr.ClassOf(err), err)
	} else {
		err = silent.err
	}
	return int(ExitCodeOf(err))
}

// argCountError matches cobra's messages for a wrong number of arguments.
var argCountError = regexp.MustCompile(`^(accepts \d+ arg\(s\), received \d+|requires at least \d+ arg\(s\)|accepts at most \d+ arg\(s\)|accepts between \d+ and \d+ arg\(s\))`)

// printError prints an error in the one style every command uses:
// "outpost: CLASS: message".
func printError(w io.Writer, class outposterr.Class, err error) {
	msg := strings.TrimPrefix(err.Error(), string(class)+": ")
	// An error can quote an agent's stderr or a server's message.
	fmt.Fprintf(w, "outpost: %s: %s\n", class, termSafe(msg))
}

// flagError marks command-line usage errors.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// silentError is an error already reported to the user.
type silentError struct{ err error }

func (e *silentError) Error() string { return e.err.Error() }
func (e *silentError) Unwrap() error { return e.err }

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "outpost",
		Short: "Run coding-agent CLIs headless in sandboxes, one classified turn at a time",
		Long: `outpost runs a coding-agent CLI (Claude Code, ...) for one turn inside a sandbox
(Docker by default, the host when asked) and reports normalized events, the final
text, token usage and a classified outcome.

` + exitHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &flagError{durationUnit(suggestFlag(cmd, err))} })
	// The template is a literal: it holds no template actions.
	root.SetVersionTemplate(strings.ReplaceAll(versionText(f.Agents()), "{{", "{{\"{{\"}}"))
	root.AddCommand(NewCmdRun(f, nil), NewCmdReplay(f, nil), NewCmdStubModel(f, nil), NewCmdGC(f), NewCmdImage(f), NewCmdConversations(f), NewCmdBootstrap(f), NewCmdBatch(f), NewCmdDoctor(f), NewCmdInit(f),
		newCmdContinue(f, false), newCmdContinue(f, true))
	root.AddCommand(NewCmdReport(f, nil), newCmdGateway(f), NewCmdGrade(f))
	root.AddCommand(NewCmdCI(f), NewCmdDataset(f))
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error (exit 2).
func exactArgs(n int) cobra.PositionalArgs { return usageArgs(cobra.ExactArgs(n)) }

// minArgs is cobra.MinimumNArgs reporting a usage error (exit 2).
func minArgs(n int) cobra.PositionalArgs { return usageArgs(cobra.MinimumNArgs(n)) }

func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &flagError{err}
		}
		return nil
	}
}
