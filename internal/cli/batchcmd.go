package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/outposterr"
)

// BatchOptions are the flags of `outpost batch`.
type BatchOptions struct {
	Run         RunOptions
	Jobs        string
	Results     string
	Concurrency int
	Resume      bool
	MaxParks    int
	MaxPark     time.Duration
	MaxRetries  int
}

// NewCmdBatch builds `outpost batch`.
func NewCmdBatch(f *Factory) *cobra.Command {
	o := &BatchOptions{Run: RunOptions{IO: f.IO}}
	cmd := &cobra.Command{
		Use:   "batch JOBS.jsonl [--results FILE] [--concurrency N] [--resume]",
		Short: "Run many turns unattended: quota parking, outage retries, fallback agents, resumable",
		Long: `batch runs every job of a JSON-lines file ({"id","agent","prompt","workspace",
"model","conversation","fallback":[…]} per line) with a concurrency cap, and appends one
JSON line per finished job to the results file (job, agent, outcome as printed by
"outpost replay", duration_ms, conversation, cli_version, turns, retries, parks, agents,
usage).

Quota failures try the next fallback agent, else are parked until their reset time (or
--max-park) and resumed on the conversation they left, with a short continuation prompt.
Outages (overload, 5xx, connection failures, timeouts) are retried with capped
exponential backoff and full jitter, then fall back. A turn is stopped as soon as the
CLI's own retry chatter proves a quota failure.

A signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) stops scheduling, cancels running turns and
removes their sandboxes; jobs without a result line are redone by --resume, finished ones
never are. The exit code is 0 when every job succeeded, 1 otherwise (configuration errors:
2; a signal: 128 + its number).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Jobs = args[0]
			if o.Results == "" {
				o.Results = o.Jobs + ".results.jsonl"
			}
			return runBatch(cmd.Context(), f, o)
		},
	}
	addRunFlags(f, cmd, &o.Run)
	fl := cmd.Flags()
	fl.StringVar(&o.Results, "results", "", "results file (JSON lines, appended; default JOBS.results.jsonl)")
	fl.IntVar(&o.Concurrency, "concurrency", 4, "turns running at once (at least 1; jobs start in file order)")
	fl.BoolVar(&o.Resume, "resume", false, "skip jobs that already have a result line")
	fl.IntVar(&o.MaxParks, "max-parks", 3, "times one job may wait for a quota reset (0: never; fail or fall back at once)")
	fl.DurationVar(&o.MaxPark, "max-park", 6*time.Hour, "longest single wait for a quota reset")
	fl.IntVar(&o.MaxRetries, "max-retries", 3, "outage retries per agent (0: none)")
	return cmd
}

// batchOptions checks the numeric flags and maps them to batch.Options,
// whose zero values mean "the default": an explicit 0 here means none.
func (o *BatchOptions) batchOptions() (batch.Options, error) {
	switch {
	case o.Concurrency < 1:
		return batch.Options{}, &flagError{fmt.Errorf("--concurrency must be at least 1, not %d", o.Concurrency)}
	case o.MaxRetries < 0:
		return batch.Options{}, &flagError{fmt.Errorf("--max-retries must be 0 or more, not %d", o.MaxRetries)}
	case o.MaxParks < 0:
		return batch.Options{}, &flagError{fmt.Errorf("--max-parks must be 0 or more, not %d", o.MaxParks)}
	case o.MaxPark <= 0:
		return batch.Options{}, &flagError{fmt.Errorf("--max-park must be positive, not %s", o.MaxPark)}
	}
	none := func(n int) int {
		if n == 0 {
			return -1 // batch.Options: negative is none, zero the default
		}
		return n
	}
	return batch.Options{Concurrency: o.Concurrency, MaxParks: none(o.MaxParks), MaxPark: o.MaxPark,
		MaxRetries: none(o.MaxRetries)}, nil
}

func runBatch(ctx context.Context, f *Factory, o *BatchOptions) error {
	bo, err := o.batchOptions()
	if err != nil {
		return err
	}
	jobs, err := readJobs(o.Jobs)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	if o.Resume {
		if done, err = finishedJobs(o.Results); err != nil {
			return err
		}
	} else if _, err := os.Stat(o.Results); err == nil {
		return &flagError{fmt.Errorf("%s exists: pass --resume to continue that run, or choose another --results file", o.Results)}
	}
	table, err := loadAgents(f)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		for _, name := range append([]string{j.Agent}, j.Fallback...) {
			if _, err := table.Lookup(name); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
			}
		}
	}
	s, err := newSession(ctx, f, &o.Run, table)
	if err != nil {
		return err
	}
	defer s.close()
	out, err := os.OpenFile(o.Results, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "open results")
	}
	defer out.Close()

	prog := newBatchProgress(f.IO.ErrOut, isTerminal(f.IO.ErrOut))
	failed := 0
	var mu sync.Mutex
	bo.Done = done
	bo.OnStatus, bo.OnPark = prog.status, prog.park
	bo.OnRecord = func(r batch.Record) {
		b, _ := json.Marshal(r)
		mu.Lock()
		defer mu.Unlock()
		// One write per line, synced: a crash never leaves half a record.
		_, _ = out.Write(append(b, '\n'))
		_ = out.Sync()
		if !r.Outcome.OK {
			failed++
		}
		prog.record(r)
	}
	recs, err := s.r.Batch(ctx, jobs, bo)
	prog.finish()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		fmt.Fprintf(f.IO.ErrOut, "interrupted: %d jobs finished this run; `outpost batch %s --resume --results %s` continues\n",
			len(recs), o.Jobs, o.Results)
		return &silentError{outposterr.New(outposterr.Aborted, "batch interrupted")}
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return &silentError{outposterr.New(outposterr.Process, "%d of %d jobs failed", failed, len(recs))}
	}
	return nil
}

// readJobs parses a JSON-lines job file; blank lines and lines starting
// with # are skipped.
func readJobs(path string) ([]batch.Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read jobs")
	}
	var jobs []batch.Job
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var j batch.Job
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "%s line %d", path, n)
		}
		if err := j.Compile(); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "%s line %d", path, n)
		}
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read jobs")
	}
	if len(jobs) == 0 {
		return nil, outposterr.New(outposterr.Configuration, "%s holds no jobs", path)
	}
	return jobs, nil
}

// finishedJobs reads the job ids of an existing results file; a torn last
// line (a crash mid-write) is ignored.
func finishedJobs(path string) (map[string]bool, error) {
	done := map[string]bool{}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read results")
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r struct {
			Job string `json:"job"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Job != "" {
			done[r.Job] = true
		}
	}
	return done, sc.Err()
}

// batchProgress shows a live status line on a terminal, log lines otherwise.
type batchProgress struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	last batch.Status
}

func newBatchProgress(w io.Writer, tty bool) *batchProgress { return &batchProgress{w: w, tty: tty} }

func (p *batchProgress) status(s batch.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = s
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", s)
	}
}

func (p *batchProgress) record(r batch.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	state := "ok"
	if !r.Outcome.OK {
		state = r.Outcome.Class
		if r.Outcome.Unavailable != "" {
			state += " (unavailable: " + r.Outcome.Unavailable + ")"
		}
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "job %s: %s via %s in %s\n", r.Job, state, r.Agent, time.Duration(r.DurationMS)*time.Millisecond)
}

func (p *batchProgress) park(job string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "job %s: quota; parked until %s\n", job, until.UTC().Format(time.RFC3339))
}

func (p *batchProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, p.last.String())
}
