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
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/outpost-dev/outpost/outposterr"
)

// Version is the outpost version, set at build time with -ldflags.
var Version = "dev"

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
	IO       IOStreams
	Getenv   func(string) string
	LookPath func(string) (string, error)
	Now      func() time.Time
}

// NewFactory returns the production factory.
func NewFactory() *Factory {
	return &Factory{
		IO: IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
			OutTTY: term.IsTerminal(int(os.Stdout.Fd()))},
		Getenv:   os.Getenv,
		LookPath: exec.LookPath,
		Now:      time.Now,
	}
}

// Main runs the outpost command with args and returns the exit code.
// It never calls os.Exit itself.
func Main(args []string) int {
	f := NewFactory()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return Execute(ctx, f, args)
}

// Execute runs the command tree with f and returns the exit code.
func Execute(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return outposterr.ExitOK
	}
	var flagErr *flagError
	if errors.As(err, &flagErr) {
		fmt.Fprintln(f.IO.ErrOut, "outpost:", err)
		return outposterr.ExitConfiguration
	}
	var silent *silentError
	if !errors.As(err, &silent) {
		fmt.Fprintln(f.IO.ErrOut, "outpost:", err)
	} else {
		err = silent.err
	}
	return outposterr.ExitCode(err)
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

Exit codes:
  0    success
  1    the agent CLI failed (process)
  2    configuration: bad flags, input or missing credentials
  3    quota: a usage limit was hit (see reset_at)
  4    the model service is unavailable (overload, 5xx, connection); retry later
  5    authentication failed (missing or rejected credentials)
  6    timeout (deadline or idle)
  7    sandbox: Docker or host execution failed
  8    bootstrap: installing or verifying a CLI failed
  9    session: a conversation could not be found or restored
  10   protocol: the CLI's output broke its contract
  130  aborted (interrupted)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &flagError{err} })
	root.AddCommand(NewCmdRun(f, nil), NewCmdReplay(f, nil), NewCmdStubModel(f, nil), NewCmdGC(f), NewCmdImage(f), NewCmdConversations(f), NewCmdBootstrap(f), NewCmdBatch(f), NewCmdDoctor(f), NewCmdInit(f),
		newCmdContinue(f, false), newCmdContinue(f, true))
	root.AddCommand(NewCmdReport(f, nil))
	return root
}

// exactArgs is cobra.ExactArgs reporting a flag (usage) error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &flagError{err}
		}
		return nil
	}
}
