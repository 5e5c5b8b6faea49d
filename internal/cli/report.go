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

	// Compare, set by --compare, renders Input (run A, before) against
	// Against (run B, after).
	Compare bool
	Against string
}

// NewCmdReport builds `outpost report`. runF replaces the action in tests.
func NewCmdReport(f *Factory, runF func(*ReportOptions) error) *cobra.Command {
	o := &ReportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report DIR|RESULTS.jsonl [--format table|markdown|html|junit|github] [-o FILE]\n  outpost report --compare RUN_A RUN_B [--format table|markdown|html] [-o FILE]",
		Short: "Render a run directory or a batch results file for people and CI",
		Long: `report reads a run directory (written by --out) or a batch results file and renders it.
Every format leads with what was solved: "solved 3 of 7 graded jobs …; pass@1 …" when a
verifier graded the jobs, "not graded" when none did (a job that only ran to its end is
never called solved or succeeded), then how the runs ended.

  table     the headline, a terminal table (verdict, reward, outcome, …) with a totals
            line, and per task its attempts, passes, pass@1, pass@n and mean reward ± SE
  markdown  the same as Markdown; fits $GITHUB_STEP_SUMMARY
  html      one self-contained page: the headline, charts, pass@k per task, and a job
            table with a search box and a verdict filter; opening a job shows its prompt,
            metadata, verdict and reward, verifier output, patch as a coloured diff and
            trajectory as a conversation (a run directory has them; a results file has
            no prompt or trajectory). It loads nothing from the network.
  junit     JUnit XML, one testcase per job: verdict fail is a <failure>, a verifier
            error an <error>, a failed run without a verdict an <error> of its class, a
            job without a verifier that ran to its end neither; properties carry the
            verdict, reward, task and trial
  github    GitHub Actions annotations: ::error per job the verifier failed, pointing at
            the failing test's file and line (pytest, go test) and at the first changed
            line of each file of its patch; per verifier error and per failed run; a
            ::warning per job that needed retries, parks or a fallback; a ::notice with
            the headline

--compare RUN_A RUN_B compares two runs (directories or results files; A before, B
after) task by task: fixed (solved in B, not in A), broke, same, new, gone; the solved,
pass@1, pass@k and cost deltas; as a table, markdown or html.

Costs marked ~ are estimates at API list prices; unknown costs are not counted and the
total says how many there were.

--atif DIR exports every attempt's trajectory of a run directory as ATIF v1.7 (the Agent
Trajectory Interchange Format that trajectory viewers and analysis tools read) instead:
DIR/JOB/N/trajectory.json per attempt N (JOB the job id made a safe file name).

Exit codes: 0 rendered (whatever the jobs' outcomes), 2 configuration: the input is
missing, malformed (the error names the file and line numbers) or the format unknown.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.Compare {
				if len(args) != 2 {
					return &flagError{fmt.Errorf("--compare takes two runs, RUN_A and RUN_B; got %d arguments", len(args))}
				}
				return nil
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Input = args[0]
			formats := report.Formats
			if o.Compare {
				o.Against, formats = args[1], report.CompareFormats
			}
			if !slices.Contains(formats, o.Format) {
				return &flagError{fmt.Errorf("--format %q: want one of %s", o.Format, strings.Join(formats, ", "))}
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

	cmd.Flags().BoolVar(&o.Compare, "compare", false, "compare two runs, RUN_A (before) and RUN_B (after), task by task")
	return cmd
}

func runReport(o *ReportOptions) error {
	r, err := report.Load(o.Input)
	if err != nil {
		return err
	}
	render := r.Render
	if o.Compare {
		b, err := report.Load(o.Against)
		if err != nil {
			return err
		}
		render = report.Compare(r, b).Render
	}
	if o.Output == "" {
		return render(o.IO.Out, o.Format)
	}
	var buf bytes.Buffer
	if err := render(&buf, o.Format); err != nil {
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
			b, err := json.MarshalIndent(atif.FromAttempt(j, agents[j.ID], a), "", "  ")
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
