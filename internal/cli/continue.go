package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newCmdContinue builds `outpost resume ID PROMPT` and `outpost fork ID
// PROMPT`: run with --resume (and --fork), the agent taken from the stored
// conversation unless --agent says otherwise.
func newCmdContinue(f *Factory, fork bool) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	use, short := "resume ID PROMPT|-", "Continue a stored conversation in a fresh sandbox"
	if fork {
		use, short = "fork ID PROMPT|-", "Fork a stored conversation: continue it as a new one, leaving the original intact"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Turn.Resume, opts.Turn.Prompt, opts.Turn.Fork = args[0], args[1], fork
			if opts.Turn.Agent == "" {
				if opts.Store.NoStore {
					return &flagError{fmt.Errorf("--agent is required with --no-store")}
				}
				s, err := openStore(f, opts.Store.Dir, opts.Sandbox.Workspace)
				if err != nil {
					return err
				}
				m, err := s.Stat(cmd.Context(), opts.Turn.Resume)
				if err != nil {
					return err
				}
				opts.Turn.Agent = m.Agent
			}
			return runRun(cmd.Context(), cmd, f, opts)
		},
	}
	addRunFlags(f, cmd, opts)
	return cmd
}
