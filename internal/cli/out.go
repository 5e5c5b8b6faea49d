package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-dev/outpost/runrec"
)

// openRecord creates (or continues) the run directory of --out: the
// manifest names the command, the versions, the sandbox and which flags
// were set (names only: values may be secrets or prompts). Reusing a run
// directory continues its run, which it says on errOut.
func openRecord(cmd *cobra.Command, opts *RunOptions, errOut io.Writer) (*runrec.Recorder, error) {
	if opts.Output.Out == "" {
		return nil, nil
	}
	var flags []string
	cmd.Flags().Visit(func(fl *pflag.Flag) { flags = append(flags, "--"+fl.Name) })
	m := runrec.Manifest{Command: cmd.Name(), OutpostVersion: Version, Sandbox: kindOrDefault(opts.Sandbox.Kind),
		Image: opts.Sandbox.Image, Flags: flags, Host: runrec.HostInfo()}
	rec, err := runrec.Create(opts.Output.Out, m)
	if err != nil {
		return nil, err
	}
	if prev, n := rec.Continues(); n > 0 {
		// Continued, never overwritten: the earlier sessions' results and
		// attempts stay, the new ones are appended and numbered after them.
		fmt.Fprintf(errOut, "outpost: --out %s: continuing the run of outpost %s started %s (session %d; earlier results and attempts are kept, new ones appended; choose another --out for a new run)\n",
			termSafe(opts.Output.Out), termSafe(prev.Command), prev.Started.UTC().Format(time.RFC3339), n+1)
	}
	return rec, nil
}
