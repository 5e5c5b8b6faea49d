package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// ReplayOptions are the flags of `outpost replay`.
type ReplayOptions struct {
	IO       IOStreams
	Agent    string
	Stdout   string
	Stderr   string
	ExitCode int
	Time     string
	Now      func() time.Time

	ctx context.Context // the command's: a signal (INT, TERM, HUP, QUIT) ends the replay
}

// NewCmdReplay builds `outpost replay`. runF replaces the action in tests.
func NewCmdReplay(f *Factory, runF func(*ReplayOptions) error) *cobra.Command {
	opts := &ReplayOptions{IO: f.IO, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "replay --agent NAME --stdout FILE [--stderr FILE] [--exit-code N]",
		Short: "Re-decode a recorded run into normalized events and an outcome",
		Long: `replay re-decodes a recorded run of an agent CLI exactly as a live turn is judged:
the same decoder, recognizers and classification. It prints one JSON object per
normalized event and, last, one object with "type":"outcome" and the fields
ok, class, unavailable, reset_at, conversation, text and usage. The outcome
schema is stable: use it to re-score old logs. The exit code is the outcome's.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Agent == "" || opts.Stdout == "" {
				return &flagError{fmt.Errorf("--agent and --stdout are required")}
			}
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return runReplay(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent that produced the recording ("+builtinNames(f)+", or a driver)")
	cmd.Flags().StringVar(&opts.Stdout, "stdout", "", "file holding the CLI's stdout (- for standard input)")
	cmd.Flags().StringVar(&opts.Stderr, "stderr", "", "file holding the CLI's stderr")
	cmd.Flags().IntVar(&opts.ExitCode, "exit-code", 0, "the CLI's exit code")
	cmd.Flags().StringVar(&opts.Time, "time", "", "RFC 3339 instant the run happened (resolves relative quota resets; default now)")
	return cmd
}

func runReplay(ctx context.Context, f *Factory, opts *ReplayOptions) error {
	table, err := loadAgents(f)
	if err != nil {
		return err
	}
	row, err := table.Lookup(opts.Agent)
	if err != nil {
		return err
	}
	if opts.ExitCode < 0 || opts.ExitCode > 255 {
		return &flagError{fmt.Errorf("--exit-code must be a process exit code, 0 to 255, not %d", opts.ExitCode)}
	}
	a := row.New()
	at := opts.Now()
	if opts.Time != "" {
		at, err = time.Parse(time.RFC3339, opts.Time)
		if err != nil {
			return &flagError{fmt.Errorf("--time: %w", err)}
		}
	}
	var stdout io.Reader
	if opts.Stdout == "-" {
		stdout = opts.IO.In
	} else {
		fh, err := os.Open(opts.Stdout)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "open --stdout")
		}
		defer fh.Close()
		stdout = fh
	}
	var stderr io.Reader
	if opts.Stderr != "" {
		fh, err := os.Open(opts.Stderr)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "open --stderr")
		}
		defer fh.Close()
		stderr = fh
	}
	r := newRenderer(opts.IO.Out, true)
	defer r.close()
	// Replay stops when ctx is cancelled (SIGINT, SIGTERM): the outcome
	// is then aborted, with what was decoded so far.
	res := harness.Replay(ctx, a, harness.Recording{Stdout: stdout, Stderr: stderr,
		Exit: sandbox.ExitStatus{Code: opts.ExitCode}, At: at}, r.event, false)
	r.outcome(res)
	if res.Err != nil {
		return &silentError{res.Err}
	}
	return nil
}
