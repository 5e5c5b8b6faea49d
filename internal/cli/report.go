package cli

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/report"
)

// ReportOptions are the flags of `outpost report`.
type ReportOptions struct {
	IO     IOStreams
	Input  string
	Format string
	Output string
}

// NewCmdReport builds `outpost report`. runF replaces the action in tests.
func NewCmdReport(f *Factory, runF func(*ReportOptions) error) *cobra.Command {
	o := &ReportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report DIR|RESULTS.jsonl [--format table|markdown|html|junit|github] [-o FILE]",
		Short: "Render a run directory or a batch results file for people and CI",
		Long: `report reads a run directory (written by --out) or a batch results file and renders it:

  table     a terminal table with a totals line (default)
  markdown  a summary and a table ending with a totals row; fits $GITHUB_STEP_SUMMARY
  html      one self-contained page: outcome, duration, token, cost and quota-park charts,
            and every job's trajectory as a conversation (a run directory has them; a
            results file does not). It loads nothing from the network.
  junit     JUnit XML, one testcase per job; a failure carries the class and the message
  github    GitHub Actions annotations: ::error per failed job, ::warning per job that
            needed retries, parks or a fallback, ::notice with the totals

Costs marked ~ are estimates at API list prices; unknown costs are not counted and the
total says how many there were.

Exit codes: 0 rendered (whatever the jobs' outcomes), 2 configuration: the input is
missing, malformed (the error names the file and line numbers) or the format unknown.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Input = args[0]
			if !slices.Contains(report.Formats, o.Format) {
				return &flagError{fmt.Errorf("--format %q: want one of %s", o.Format, strings.Join(report.Formats, ", "))}
			}
			if runF != nil {
				return runF(o)
			}
			return runReport(o)
		},
	}
	cmd.Flags().StringVar(&o.Format, "format", "table", "output format: "+strings.Join(report.Formats, ", "))
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "write to FILE (replaced atomically) instead of standard output")
	return cmd
}

func runReport(o *ReportOptions) error {
	r, err := report.Load(o.Input)
	if err != nil {
		return err
	}
	if o.Output == "" {
		return r.Render(o.IO.Out, o.Format)
	}
	var buf bytes.Buffer
	if err := r.Render(&buf, o.Format); err != nil {
		return err
	}
	if err := atomicfile.Write(o.Output, buf.Bytes(), 0o644); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "write report")
	}
	return nil
}
