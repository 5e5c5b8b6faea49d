package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/atif"
	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/report"
	"github.com/outpost-dev/outpost/runrec"
)

// ReportOptions are the flags of `outpost report`.
type ReportOptions struct {
	IO     IOStreams
	Input  string
	Format string
	Output string
	// ATIF is a directory to export the run's trajectories into as ATIF
	// instead of rendering a report.
	ATIF string
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

--atif DIR exports every attempt's trajectory of a run directory as ATIF v1.7 (the Agent
Trajectory Interchange Format that trajectory viewers and analysis tools read) instead:
DIR/JOB/N/trajectory.json per attempt N (JOB the job id made a safe file name).

Exit codes: 0 rendered (whatever the jobs' outcomes), 2 configuration: the input is
missing, malformed (the error names the file and line numbers) or the format unknown.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Input = args[0]
			if !slices.Contains(report.Formats, o.Format) {
				return &flagError{fmt.Errorf("--format %q: want one of %s", o.Format, strings.Join(report.Formats, ", "))}
			}
			if o.ATIF != "" && (cmd.Flags().Changed("format") || cmd.Flags().Changed("output")) {
				return &flagError{errors.New("--atif exports trajectories, not a report: drop --format and -o")}
			}
			if runF != nil {
				return runF(o)
			}
			if o.ATIF != "" {
				return exportATIF(o)
			}
			return runReport(o)
		},
	}
	cmd.Flags().StringVar(&o.Format, "format", "table", "output format: "+strings.Join(report.Formats, ", "))
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "write to FILE (replaced atomically) instead of standard output")
	cmd.Flags().StringVar(&o.ATIF, "atif", "", "export every attempt's trajectory of the run directory as ATIF v1.7 into DIR (DIR/JOB/N/trajectory.json) instead")
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

// Bounds of an ATIF export's read of a run directory: every event of an
// attempt up to these, the rest noted.
const (
	atifMaxEvents = 1 << 20
	atifMaxBytes  = 1 << 30
)

// exportATIF writes each attempt of the run directory o.Input as an ATIF
// trajectory: o.ATIF/JOB/N/trajectory.json.
func exportATIF(o *ReportOptions) error {
	run, err := runrec.Read(o.Input, runrec.ReadOptions{Events: true, MaxEvents: atifMaxEvents, MaxEventBytes: atifMaxBytes})
	if err != nil {
		return err
	}
	agents := map[string]string{}
	for _, r := range run.Records {
		agents[r.Job] = r.Agent
	}
	n := 0
	for _, j := range run.Jobs {
		name, err := runrec.SafeName(j.ID)
		if err != nil {
			return err
		}
		for _, a := range j.Attempts {
			b, err := json.MarshalIndent(atif.FromAttempt(j.ID, agents[j.ID], a), "", "  ")
			if err != nil {
				return outposterr.Wrap(outposterr.Internal, err, "export job %s attempt %d", j.ID, a.Number)
			}
			dir := filepath.Join(o.ATIF, name, strconv.Itoa(a.Number))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "export ATIF")
			}
			if err := atomicfile.Write(filepath.Join(dir, "trajectory.json"), append(b, '\n'), 0o600); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "export ATIF")
			}
			n++
		}
	}
	for _, note := range run.Notes {
		fmt.Fprintf(o.IO.ErrOut, "note: %s\n", termSafe(note))
	}
	fmt.Fprintf(o.IO.ErrOut, "wrote %d trajectories (%s) of %d jobs to %s\n", n, atif.SchemaVersion, len(run.Jobs), o.ATIF)
	return nil
}
