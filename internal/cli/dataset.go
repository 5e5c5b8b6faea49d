package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/dataset"
	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
)

// NewCmdDataset builds `outpost dataset`.
func NewCmdDataset(f *Factory) *cobra.Command {
	ds := &cobra.Command{Use: "dataset", Short: "Turn evaluation datasets into jobs files"}
	imp := &cobra.Command{Use: "import", Short: "Import a dataset as a jobs file"}
	var repos, out, agent, testCommand, img, environment string
	var attempts int
	var timeout time.Duration
	swe := &cobra.Command{
		Use:   "swebench FILE --repos DIR [-o JOBS.jsonl] [--agent NAME] [--test-command CMD] [--attempts K] [--image IMAGE | --environment DIR]",
		Short: "Turn SWE-bench rows and local repository mirrors into jobs with verifiers",
		Long: `swebench reads SWE-bench instances (a JSON array, or one JSON object per line; "-":
standard input) and writes one job line per instance: id and metadata.instance_id
the instance_id, the prompt its problem_statement, the source the local mirror of its
repo at base_commit, and a verifier naming its tests:

  "verify": {"command", "fail_to_pass", "pass_to_pass", "parser": "pytest", "test_patch"}

FAIL_TO_PASS and PASS_TO_PASS are read as JSON arrays or as strings holding one, as
SWE-bench stores them. The mirror of owner/name is --repos DIR/owner__name, else
DIR/owner/name, else DIR/name: a git repository (a clone or a --mirror clone) that
holds the base commit. The verifier's command is --test-command with {tests} replaced
by the instance's tests, each quoted (default: ` + dataset.DefaultTestCommand + `).
The tests need an image that runs them: --image names one, --environment DIR writes an
"environment" whose DIR/Dockerfile batch builds once.

A row without an instance_id, repo, base_commit, problem_statement or FAIL_TO_PASS,
a repo without a mirror or a mirror without the commit is a configuration error
(exit 2) naming the row; nothing is written then. Mirror paths under the jobs file's
directory are written relative to it, others absolute (pass batch --allow-path DIR).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repos == "" {
				return &flagError{fmt.Errorf("--repos DIR: the directory of the repositories' local mirrors is required")}
			}
			if attempts < 0 || attempts > batch.MaxAttempts {
				return &flagError{fmt.Errorf("--attempts must be between 1 and %d, not %d", batch.MaxAttempts, attempts)}
			}
			if timeout < 0 {
				return &flagError{fmt.Errorf("--verify-timeout must be positive, not %s", timeout)}
			}
			if fi, err := os.Stat(repos); err != nil || !fi.IsDir() {
				return outposterr.New(outposterr.Configuration, "--repos %s is not a directory", repos)
			}
			in := f.IO.In
			if args[0] != "-" {
				fh, err := os.Open(args[0])
				if err != nil {
					return outposterr.Wrap(outposterr.Configuration, err, "read the dataset")
				}
				defer fh.Close()
				in = fh
			}
			base, err := os.Getwd()
			if err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "current directory")
			}
			if out != "" && out != "-" {
				abs, err := filepath.Abs(out)
				if err != nil {
					return outposterr.Wrap(outposterr.Configuration, err, "-o")
				}
				base = filepath.Dir(abs)
			}
			opts := dataset.SWEBenchOptions{Repos: repos, Base: base, Agent: agent, TestCommand: testCommand, Attempts: attempts,
				Image: img, Environment: environment, Timeout: timeout}
			var buf []byte
			n, err := dataset.ImportSWEBench(cmd.Context(), in, opts, func(j batch.Job) error {
				b, err := json.Marshal(j)
				if err != nil {
					return err
				}
				buf = append(append(buf, b...), '\n')
				return nil
			})
			if err != nil {
				return err
			}
			if n == 0 {
				return outposterr.New(outposterr.Configuration, "%s holds no instance", args[0])
			}
			if out == "" || out == "-" {
				w := bufio.NewWriter(f.IO.Out)
				_, _ = w.Write(buf)
				return w.Flush()
			}
			if err := atomicfile.Write(out, buf, 0o644); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "write %s", out)
			}
			noun := "jobs"
			if n == 1 {
				noun = "job"
			}
			fmt.Fprintf(f.IO.ErrOut, "wrote %d %s to %s\n", n, noun, out)
			return nil
		},
	}
	fl := swe.Flags()
	fl.StringVar(&repos, "repos", "", "directory of the repositories' local mirrors (owner__name, owner/name or name)")
	fl.StringVarP(&out, "output", "o", "", "jobs file to write (default: standard output)")
	fl.StringVar(&agent, "agent", "claude", "the jobs' agent")
	fl.StringVar(&testCommand, "test-command", "", "the verifier's command; {tests} becomes the instance's tests (default: "+dataset.DefaultTestCommand+")")
	fl.IntVar(&attempts, "attempts", 0, "attempts per instance (0: one)")
	fl.StringVar(&img, "image", "", "the jobs' image (one that runs the tests)")
	fl.StringVar(&environment, "environment", "", "a directory whose Dockerfile builds the jobs' image (their \"environment\")")
	fl.DurationVar(&timeout, "verify-timeout", 0, "the verifier's timeout (0: batch's default)")
	imp.AddCommand(swe)
	ds.AddCommand(imp)
	return ds
}
