package runrec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/internal/jsonl"
	"github.com/outpost-dev/outpost/outposterr"
)

// Run is a run directory read back.
type Run struct {
	Dir      string
	Manifest Manifest
	// Records are results.jsonl's lines, in order.
	Records []batch.Record
	Parks   []Park
	// Jobs are the job directories, sorted by id.
	Jobs []JobDir
	// Notes say what the reader left out or could not use (a torn last
	// line, a skipped link, a trajectory loaded only in part).
	Notes []string
}

// JobDir is one job directory.
type JobDir struct {
	ID       string
	Attempts []AttemptDir // by number
	// Prompt and Metadata are what the job was asked (input.json, when
	// kept: HasInput); PromptCut counts the prompt's bytes that were not
	// kept.
	HasInput  bool
	Prompt    string
	PromptCut int64
	Metadata  json.RawMessage
}

// AttemptDir is one attempt directory.
type AttemptDir struct {
	Number int
	// Result is nil for an attempt the run never finished.
	Result *AttemptResult
	// Events are the loaded trajectory (ReadOptions.Events); Truncated is
	// the writer's marker when the trajectory hit its cap; Omitted counts
	// events the reader did not load (its own bounds).
	Events    []adapters.Event
	Truncated *Truncated
	Omitted   int
	Stderr    string
	Patch     string
}

// ReadOptions bound a read. Zero values are documented per field.
type ReadOptions struct {
	// Events loads trajectories, stderr tails and patches.
	Events bool
	// MaxEvents bounds the events loaded per attempt (0: 2000).
	MaxEvents int
	// MaxEventBytes bounds the trajectory bytes loaded for the whole run
	// (0: 64 MiB); later attempts are listed without events.
	MaxEventBytes int64
	// MaxJobs bounds the job directories read (0: 10000); MaxAttempts the
	// attempts per job (0: 100).
	MaxJobs, MaxAttempts int
}

// Bounds on what a read takes from one file.
const (
	maxLine       = 16 << 20
	maxResultFile = 32 << 20
	maxStderr     = 256 << 10
	maxPatchShown = 1 << 20
)

// Read reads the run directory at dir. It is hostile-input code: it follows
// no links, bounds every file and line, and reports malformed content (a
// configuration error naming the file and its line numbers) instead of
// guessing. A torn last line (a writer that crashed) is noted, not an error.
func Read(dir string, opts ReadOptions) (*Run, error) {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = 2000
	}
	if opts.MaxEventBytes <= 0 {
		opts.MaxEventBytes = 64 << 20
	}
	if opts.MaxJobs <= 0 {
		opts.MaxJobs = 10000
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 100
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s is not a run directory", dir)
	}
	rd := &reader{run: &Run{Dir: dir, Manifest: *m}, opts: opts, budget: opts.MaxEventBytes}
	jsonlDecode(rd, filepath.Join(dir, ResultsFile), func(_ int, rec batch.Record) error {
		if rec.Job == "" {
			return errors.New("record without a job id")
		}
		rd.run.Records = append(rd.run.Records, rec)
		return nil
	})
	jsonlDecode(rd, filepath.Join(dir, ParksFile), func(_ int, p Park) error {
		if p.Job == "" {
			return errors.New("park without a job id")
		}
		rd.run.Parks = append(rd.run.Parks, p)
		return nil
	})
	rd.jobs(filepath.Join(dir, JobsDir))
	if len(rd.errs) > 0 {
		return rd.run, outposterr.Wrap(outposterr.Configuration, errors.Join(rd.errs...), "read run directory %s", dir)
	}
	return rd.run, nil
}

type reader struct {
	run    *Run
	opts   ReadOptions
	budget int64
	errs   []error
}

func (rd *reader) note(format string, args ...any) {
	if len(rd.run.Notes) < 100 {
		rd.run.Notes = append(rd.run.Notes, fmt.Sprintf(format, args...))
	}
}

func (rd *reader) rel(path string) string {
	if r, err := filepath.Rel(rd.run.Dir, path); err == nil {
		return r
	}
	return path
}

// jsonlDecode decodes an optional JSON-lines file of the run directory.
func jsonlDecode[T any](rd *reader, path string, fn func(int, T) error) {
	f, ok := rd.openRegular(path, true)
	if !ok {
		return
	}
	defer f.Close()
	res, err := jsonl.Decode(f, rd.rel(path), jsonl.Options{MaxLine: maxLine}, fn)
	if err != nil {
		rd.errs = append(rd.errs, err)
	}
	if res.Torn {
		rd.note("%s: the last line is torn (a writer stopped mid-line); ignored", rd.rel(path))
	}
}

// openRegular opens a regular file without following links. A missing
// optional file is fine; a link or a special file is noted and skipped.
func (rd *reader) openRegular(path string, optional bool) (*os.File, bool) {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && optional:
		return nil, false
	case err != nil:
		rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(path), err))
		return nil, false
	case !st.Mode().IsRegular():
		rd.note("%s: not a regular file; skipped", rd.rel(path))
		return nil, false
	}
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(path), err))
		return nil, false
	}
	return f, true
}

// dirs lists the real directories in dir (links and files are skipped).
func (rd *reader) dirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(dir), err))
		}
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			rd.note("%s: a link; skipped", rd.rel(filepath.Join(dir, e.Name())))
			continue
		}
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func (rd *reader) jobs(root string) {
	names := rd.dirs(root)
	if len(names) > rd.opts.MaxJobs {
		rd.note("%d job directories; the first %d were read", len(names), rd.opts.MaxJobs)
		names = names[:rd.opts.MaxJobs]
	}
	for _, name := range names {
		dir := filepath.Join(root, name)
		id, err := jobOwner(dir)
		if errors.Is(err, errTornJob) {
			rd.note("%s: %v; skipped", rd.rel(dir), err)
			continue
		}
		if err != nil {
			rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(dir), err))
			continue
		}
		job := JobDir{ID: id}
		rd.input(filepath.Join(dir, InputFile), &job)
		var nums []int
		for _, a := range rd.dirs(dir) {
			if n, err := strconv.Atoi(a); err == nil && n > 0 && strconv.Itoa(n) == a {
				nums = append(nums, n)
			}
		}
		sort.Ints(nums)
		if len(nums) > rd.opts.MaxAttempts {
			rd.note("job %q: %d attempts; the first %d were read", id, len(nums), rd.opts.MaxAttempts)
			nums = nums[:rd.opts.MaxAttempts]
		}
		for _, n := range nums {
			job.Attempts = append(job.Attempts, rd.attempt(filepath.Join(dir, strconv.Itoa(n)), id, n))
		}
		rd.run.Jobs = append(rd.run.Jobs, job)
	}
	sort.Slice(rd.run.Jobs, func(i, j int) bool { return rd.run.Jobs[i].ID < rd.run.Jobs[j].ID })
}

// maxInputFile bounds input.json: the prompt's and the metadata's bounds
// with room for JSON escapes.
const maxInputFile = 4 << 20

// input reads a job's optional input.json.
func (rd *reader) input(path string, job *JobDir) {
	if _, err := os.Lstat(path); err != nil {
		return
	}
	var in Input
	if err := readSmallJSON(path, maxInputFile, &in); err != nil {
		rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(path), err))
		return
	}
	job.HasInput, job.Prompt, job.Metadata = true, in.Prompt, in.Metadata
	if in.PromptBytes > int64(len(in.Prompt)) {
		job.PromptCut = in.PromptBytes - int64(len(in.Prompt))
	}
}

func (rd *reader) attempt(dir, id string, n int) AttemptDir {
	a := AttemptDir{Number: n}
	path := filepath.Join(dir, ResultFile)
	if _, err := os.Lstat(path); err == nil {
		var ar AttemptResult
		if err := readSmallJSON(path, maxResultFile, &ar); err != nil {
			rd.errs = append(rd.errs, fmt.Errorf("%s: %w", rd.rel(path), err))
		} else {
			ar.Job, ar.Attempt = id, n // the directory is authoritative
			a.Result = &ar
		}
	}
	if !rd.opts.Events {
		return a
	}
	rd.events(filepath.Join(dir, EventsFile), &a)
	if b, ok := rd.tail(filepath.Join(dir, StderrFile), maxStderr); ok {
		a.Stderr = b
	}
	if b, ok := rd.tail(filepath.Join(dir, PatchFile), -maxPatchShown); ok {
		a.Patch = b
	}
	return a
}

// tail reads an optional text file: its last limit bytes, or with a
// negative limit its first -limit bytes; a cut is noted.
func (rd *reader) tail(path string, limit int64) (string, bool) {
	f, ok := rd.openRegular(path, true)
	if !ok {
		return "", false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false
	}
	size, n := st.Size(), limit
	if n < 0 {
		n = -n
	}
	var off int64
	if size > n {
		rd.note("%s: %d bytes; %d shown", rd.rel(path), size, n)
		if limit > 0 {
			off = size - n
		}
	}
	buf := make([]byte, min(size, n))
	m, _ := f.ReadAt(buf, off)
	return string(buf[:m]), true
}

// eventLine is one trajectory line: an event, or the truncation marker.
type eventLine struct {
	adapters.Event
	Type       string `json:"type"`
	AfterSeq   int64  `json:"after_seq"`
	LimitBytes int64  `json:"limit_bytes"`
}

func (rd *reader) events(path string, a *AttemptDir) {
	f, ok := rd.openRegular(path, true)
	if !ok {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return
	}
	if st.Size() > rd.budget {
		rd.note("%s: not loaded (the report's trajectory budget is spent)", rd.rel(path))
		if a.Result != nil {
			a.Omitted = a.Result.Trajectory.Events
		}
		return
	}
	rd.budget -= st.Size()
	res, err := jsonl.Decode(f, rd.rel(path), jsonl.Options{MaxLine: maxLine, MaxLines: rd.opts.MaxEvents},
		func(_ int, l eventLine) error {
			switch {
			case l.Type == TruncatedType:
				a.Truncated = &Truncated{Type: l.Type, AfterSeq: l.AfterSeq, LimitBytes: l.LimitBytes}
			case l.Type != "":
				return fmt.Errorf("unknown line type %q", l.Type)
			case l.Kind == "":
				return errors.New("event without a kind")
			default:
				a.Events = append(a.Events, l.Event)
			}
			return nil
		})
	if err != nil {
		rd.errs = append(rd.errs, err)
	}
	if res.Torn {
		rd.note("%s: the last line is torn (the run stopped mid-write); ignored", rd.rel(path))
	}
	if res.Truncated {
		rd.note("%s: more than %d events; the first %d are shown", rd.rel(path), rd.opts.MaxEvents, rd.opts.MaxEvents)
		if a.Result != nil {
			a.Omitted = max(a.Result.Trajectory.Events-len(a.Events), 0)
		}
	}
}
