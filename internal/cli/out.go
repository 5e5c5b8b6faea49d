package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-dev/outpost/runrec"
)

// openRecord creates (or continues) the run directory of --out: the
// manifest names the command, the versions, the sandbox and which flags
// were set (names only: values may be secrets or prompts).
func openRecord(cmd *cobra.Command, opts *RunOptions) (*runrec.Recorder, error) {
	if opts.Output.Out == "" {
		return nil, nil
	}
	var flags []string
	cmd.Flags().Visit(func(fl *pflag.Flag) { flags = append(flags, "--"+fl.Name) })
	m := runrec.Manifest{Command: cmd.Name(), OutpostVersion: Version, Sandbox: kindOrDefault(opts.Sandbox.Kind),
		Image: opts.Sandbox.Image, Flags: flags, Host: runrec.HostInfo()}
	return runrec.Create(opts.Output.Out, m)
}
