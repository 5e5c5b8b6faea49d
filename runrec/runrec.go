// Package runrec writes and reads run directories: what a run or a batch
// did, kept for people and for `outpost report`.
//
// Layout (format 1):
//
//	DIR/manifest.json                  the run: Outpost and CLI versions, image and digest, flags, start and end, host
//	DIR/results.jsonl                  one batch.Record per finished job (the format of `batch --results`)
//	DIR/parks.jsonl                    one Park per quota wait
//	DIR/jobs/NAME/job.json             the job's id (NAME is SafeName(id), unique)
//	DIR/jobs/NAME/input.json           what the job was asked: its prompt (the first 256 KiB) and metadata (Input)
//	DIR/jobs/NAME/N/events.jsonl       attempt N's trajectory: its normalized events, one JSON object per line
//	                                   (the objects `outpost run --json` prints), bounded by a truncation marker
//	DIR/jobs/NAME/N/stderr.txt         the tail of the CLI's standard error
//	DIR/jobs/NAME/N/result.json        the attempt's AttemptResult (outcome, usage, timing, trajectory size, a resumed turn's prompt)
//	DIR/jobs/NAME/N/patch.diff         the attempt's patch, when one was given
//
// A job's verdict, reward and verifier output (its tail) are in its
// results.jsonl line (batch.Record's verdict, reward and verify).
//
// An attempt is one turn of a job: a retry, a resumed park or a fallback
// agent each make a new one. A [Recorder] is safe for concurrent jobs; each
// [Attempt] is written by one turn. Recording never fails a turn: an attempt's
// first error is kept and returned by Finish, and Close returns them all.
//
// Files are 0600 and directories 0700: trajectories hold the agent's view of
// the workspace. manifest.json, job.json, result.json and patch.diff are
// replaced atomically; results.jsonl and parks.jsonl get one write per line,
// synced; events.jsonl is append-only and flushed when the attempt finishes.
// Nothing secret is written that the caller does not pass: the harness keeps
// secrets out of events and results, and Manifest.Flags must hold no values
// of secrets (flag names and variable names only).
package runrec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
)

// Format is the layout version this package writes.
const Format = 1

// File names of the layout.
const (
	ManifestFile   = "manifest.json"
	ResultsFile    = "results.jsonl"
	ParksFile      = "parks.jsonl"
	JobsDir        = "jobs"
	JobFile        = "job.json"
	InputFile      = "input.json"
	EventsFile     = "events.jsonl"
	StderrFile     = "stderr.txt"
	ResultFile     = "result.json"
	PatchFile      = "patch.diff"
	TruncatedType  = "truncated"
	dirPerm        = 0o700
	filePerm       = 0o600
	maxSmallFile   = 1 << 20 // manifest.json, job.json
	markerReserved = 256     // bytes kept for the truncation marker
)

// Defaults for options left zero.
const (
	DefaultMaxPromptBytes     = 256 << 10
	maxMetadataBytes          = 512 << 10
	DefaultMaxTrajectoryBytes = 16 << 20
	DefaultMaxPatchBytes      = 16 << 20
)

// Manifest describes a run.
type Manifest struct {
	// Format is the layout version (set by Create).
	Format int `json:"format"`
	// Command is what ran: "run" or "batch".
	Command        string `json:"command,omitempty"`
	OutpostVersion string `json:"outpost_version"`
	// CLIVersions maps an agent to its CLI version.
	CLIVersions map[string]string `json:"cli_versions,omitempty"`
	Sandbox     string            `json:"sandbox,omitempty"`
	Image       string            `json:"image,omitempty"`
	ImageDigest string            `json:"image_digest,omitempty"`
	// Flags are the command's flags as given. Never secret values.
	Flags []string `json:"flags,omitempty"`
	// Started defaults to the clock at Create; Ended is set by Close.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	Host    Host      `json:"host"`
	// MaxTrajectoryBytes is the cap each events.jsonl was written under.
	MaxTrajectoryBytes int64 `json:"max_trajectory_bytes"`
	// Previous holds the manifests of earlier sessions that wrote into this
	// directory (a resumed batch), oldest first.
	Previous []Manifest `json:"previous,omitempty"`
}

// Host names the machine a run ran on.
type Host struct {
	Name string `json:"name,omitempty"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// HostInfo describes this machine.
func HostInfo() Host {
	name, _ := os.Hostname()
	return Host{Name: name, OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// Park is one quota wait of a job.
type Park struct {
	Job   string    `json:"job"`
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
}

// Truncated is the marker line that ends a trajectory cut at its cap.
type Truncated struct {
	Type string `json:"type"` // always "truncated"
	// AfterSeq is the last event kept.
	AfterSeq   int64 `json:"after_seq"`
	LimitBytes int64 `json:"limit_bytes"`
}

// Trajectory summarizes an attempt's events.jsonl.
type Trajectory struct {
	// Events counts the events written; Dropped those cut by the cap.
	Events    int   `json:"events"`
	Dropped   int   `json:"dropped,omitempty"`
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
}

// AttemptResult is an attempt's result.json.
type AttemptResult struct {
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Agent   string `json:"agent"`
	Model   string `json:"model,omitempty"`
	// Outcome is the turn's outcome as `outpost replay` prints it.
	Outcome    harness.Outcome       `json:"outcome"`
	Started    time.Time             `json:"started,omitzero"`
	DurationMS int64                 `json:"duration_ms"`
	Counts     map[adapters.Kind]int `json:"counts,omitempty"`
	Warnings   []string              `json:"warnings,omitempty"`
	Trajectory Trajectory            `json:"trajectory"`
	// Stderr and Patch name the attempt's files, when written.
	Stderr string `json:"stderr,omitempty"`
	Patch  string `json:"patch,omitempty"`
	// PatchOmitted is the size of a patch over the cap, which is not kept.
	PatchOmitted int `json:"patch_omitted,omitempty"`
	// Prompt is the prompt this attempt was sent when it was not the job's
	// (input.json): a turn resumed after a quota wait is sent the continue
	// prompt. It is cut to DefaultMaxPromptBytes.
	Prompt string `json:"prompt,omitempty"`
}

// Input is what a job was asked: its input.json.
type Input struct {
	// Prompt is the job's prompt, cut to the recorder's bound
	// (DefaultMaxPromptBytes); PromptBytes is its whole size when cut.
	Prompt      string `json:"prompt"`
	PromptBytes int64  `json:"prompt_bytes,omitempty"`
	// Metadata is the job's metadata as given (omitted over 512 KiB;
	// MetadataBytes then says its size).
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	MetadataBytes int64           `json:"metadata_bytes,omitempty"`
}

// Option configures Create.
type Option func(*options)

type options struct {
	maxTrajectory int64
	maxPatch      int
	now           func() time.Time
	logger        *slog.Logger
}

// WithMaxTrajectoryBytes caps each events.jsonl (0: DefaultMaxTrajectoryBytes).
func WithMaxTrajectoryBytes(n int64) Option { return func(o *options) { o.maxTrajectory = n } }

// WithMaxPatchBytes caps a kept patch (0: DefaultMaxPatchBytes).
func WithMaxPatchBytes(n int) Option { return func(o *options) { o.maxPatch = n } }

// WithClock sets the clock (nil: time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger sets the debug logger (nil: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Recorder writes one run directory.
type Recorder struct {
	dir  string
	opts options

	mu       sync.Mutex
	manifest Manifest
	jobs     map[string]*jobState // by id
	taken    map[string]string    // name -> id
	open     map[*Attempt]struct{}
	results  *os.File
	parks    *os.File
	errs     []error
	closed   bool
}

type jobState struct {
	name string
	next int // the next attempt number
}

// Create starts a run directory at dir: a new or empty directory, or an
// earlier run directory (holding manifest.json), which is continued — its
// manifest moves to Previous, results and parks are appended to, and
// attempts are numbered after the recorded ones. Any other non-empty
// directory is refused (a configuration error).
func Create(dir string, m Manifest, opt ...Option) (*Recorder, error) {
	o := options{}
	for _, f := range opt {
		f(&o)
	}
	if o.maxTrajectory <= 0 {
		o.maxTrajectory = DefaultMaxTrajectoryBytes
	}
	o.maxTrajectory = max(o.maxTrajectory, 2*markerReserved)
	if o.maxPatch <= 0 {
		o.maxPatch = DefaultMaxPatchBytes
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "create run directory")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read run directory")
	}
	var prev *Manifest
	if len(entries) > 0 {
		p, err := readManifest(dir)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "%s is not empty and not a run directory", dir)
		}
		prev = p
	}
	m.Format = Format
	if m.Started.IsZero() {
		m.Started = o.now()
	}
	m.Started = m.Started.UTC()
	m.MaxTrajectoryBytes = o.maxTrajectory
	if prev != nil {
		m.Previous = append(prev.Previous, *prev)
		m.Previous[len(m.Previous)-1].Previous = nil
	}
	r := &Recorder{dir: dir, opts: o, manifest: m, jobs: map[string]*jobState{}, taken: map[string]string{}, open: map[*Attempt]struct{}{}}
	if err := os.MkdirAll(filepath.Join(dir, JobsDir), dirPerm); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "create run directory")
	}
	if err := r.writeManifest(); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "write run manifest")
	}
	return r, nil
}

// Dir returns the run directory.
func (r *Recorder) Dir() string { return r.dir }

// Continues returns the manifest of the session this one continues (the
// most recent earlier session in the directory) and how many sessions
// wrote into the directory before this one; 0 for a new run directory.
func (r *Recorder) Continues() (Manifest, int) {
	if n := len(r.manifest.Previous); n > 0 {
		return r.manifest.Previous[n-1], n
	}
	return Manifest{}, 0
}

func (r *Recorder) writeManifest() error {
	b, err := json.MarshalIndent(r.manifest, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.dir, ManifestFile), append(b, '\n'), filePerm)
}

// readManifest reads dir's manifest, bounded, refusing anything but a
// regular file.
func readManifest(dir string) (*Manifest, error) {
	b, err := readSmall(filepath.Join(dir, ManifestFile), maxSmallFile)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("manifest: format %d, want %d", m.Format, Format)
	}
	return &m, nil
}

// readSmallJSON decodes into v a regular file (not a link) of at most
// limit bytes.
func readSmallJSON(path string, limit int64, v any) error {
	b, err := readSmall(path, limit)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// readSmall reads a regular file (not a link) of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", filepath.Base(path))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", filepath.Base(path), limit)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", filepath.Base(path), limit)
	}
	return b, nil
}

// Job starts recording attempt of job id (attempt <= 0: the next one). It
// never fails: a bad id or an I/O error is kept in the Attempt, which then
// writes nothing, and returned by its Finish.
func (r *Recorder) Job(id string, attempt int) *Attempt {
	a := &Attempt{rec: r, job: id, maxBytes: r.opts.maxTrajectory}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		a.err = errors.New("record attempt: run directory closed")
		return a
	}
	js, err := r.jobLocked(id)
	if err != nil {
		a.err = err
		return a
	}
	if attempt <= 0 {
		attempt = js.next
	}
	dir := filepath.Join(r.dir, JobsDir, js.name, strconv.Itoa(attempt))
	if err := os.Mkdir(dir, dirPerm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("attempt %d already recorded", attempt)
		}
		a.err = fmt.Errorf("record job %q: %w", id, err)
		return a
	}
	js.next = max(js.next, attempt+1)
	a.n, a.dir = attempt, dir
	r.open[a] = struct{}{}
	return a
}

// jobLocked finds or creates the job's directory. A name already used by
// another id (a case-insensitive file system, or a hash collision of cut
// names) gets the id's hash appended.
func (r *Recorder) jobLocked(id string) (*jobState, error) {
	if js, ok := r.jobs[id]; ok {
		return js, nil
	}
	name, err := SafeName(id)
	if err != nil {
		return nil, err
	}
	for _, cand := range []string{name, name + "~" + idHash(id)} {
		if other, ok := r.taken[cand]; ok && other != id {
			continue
		}
		dir := filepath.Join(r.dir, JobsDir, cand)
		switch owner, err := jobOwner(dir); {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, errTornJob):
			if !errors.Is(err, errTornJob) {
				if err := os.Mkdir(dir, dirPerm); err != nil {
					return nil, fmt.Errorf("record job %q: %w", id, err)
				}
			}
			b, _ := json.Marshal(struct {
				ID string `json:"id"`
			}{id})
			if err := atomicfile.Write(filepath.Join(dir, JobFile), append(b, '\n'), filePerm); err != nil {
				return nil, fmt.Errorf("record job %q: %w", id, err)
			}
			fallthrough
		case err == nil && owner == id:
			js := &jobState{name: cand, next: nextAttempt(dir)}
			r.jobs[id], r.taken[cand] = js, id
			return js, nil
		case err != nil:
			return nil, fmt.Errorf("record job %q: %w", id, err)
		}
	}
	return nil, fmt.Errorf("record job %q: no free directory name", id)
}

// errTornJob is a job directory without job.json and without anything
// else of a job: a run stopped between making it and writing job.json.
var errTornJob = errors.New("a job directory without job.json (the run stopped while creating it)")

// jobOwner reads the id a job directory belongs to.
func jobOwner(dir string) (string, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory", filepath.Base(dir))
	}
	b, err := readSmall(filepath.Join(dir, JobFile), maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		// job.json is written right after the directory is made: without
		// it and without attempts, a run stopped in between.
		entries, rerr := os.ReadDir(dir)
		if rerr != nil {
			return "", rerr
		}
		for _, e := range entries {
			if e.IsDir() || e.Name() == InputFile {
				return "", fmt.Errorf("%s/%s: no job id (missing)", filepath.Base(dir), JobFile)
			}
		}
		return "", errTornJob
	}
	if err != nil {
		return "", err
	}
	var j struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &j); err != nil || j.ID == "" {
		return "", fmt.Errorf("%s/%s: no job id", filepath.Base(dir), JobFile)
	}
	return j.ID, nil
}

// nextAttempt is one more than the highest attempt recorded in dir.
func nextAttempt(dir string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if v, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && v > n {
			n = v
		}
	}
	return n + 1
}

// Input keeps what job id was asked (its prompt and metadata) in the job's
// input.json, once: the first call for a job writes it, later calls (more
// attempts of the job) keep the first. The prompt is cut to its bound on a
// character boundary.
func (r *Recorder) Input(id, prompt string, metadata json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("record input: run directory closed")
	}
	js, err := r.jobLocked(id)
	if err != nil {
		return err
	}
	path := filepath.Join(r.dir, JobsDir, js.name, InputFile)
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	in := Input{Prompt: cutPrompt(prompt)}
	if len(in.Prompt) < len(prompt) {
		in.PromptBytes = int64(len(prompt))
	}
	switch {
	case len(metadata) > maxMetadataBytes:
		in.MetadataBytes = int64(len(metadata))
	case len(metadata) > 0 && json.Valid(metadata):
		in.Metadata = metadata
	}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return fmt.Errorf("record input: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), filePerm); err != nil {
		r.errs = append(r.errs, err)
		return fmt.Errorf("record input: %w", err)
	}
	return nil
}

// cutPrompt cuts a prompt to DefaultMaxPromptBytes on a character boundary.
func cutPrompt(prompt string) string {
	if len(prompt) <= DefaultMaxPromptBytes {
		return prompt
	}
	cut := DefaultMaxPromptBytes
	for cut > 0 && prompt[cut]&0xC0 == 0x80 {
		cut--
	}
	return prompt[:cut]
}

// Record appends a finished job's record to results.jsonl.
func (r *Recorder) Record(rec batch.Record) error {
	return r.appendLine(&r.results, ResultsFile, rec)
}

// Park appends a quota wait to parks.jsonl.
func (r *Recorder) Park(job string, at, until time.Time) error {
	return r.appendLine(&r.parks, ParksFile, Park{Job: job, At: at.UTC(), Until: until.UTC()})
}

func (r *Recorder) appendLine(f **os.File, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record %s: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("record %s: run directory closed", name)
	}
	if *f == nil {
		fh, err := os.OpenFile(filepath.Join(r.dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY|noFollow, filePerm)
		if err != nil {
			r.errs = append(r.errs, err)
			return fmt.Errorf("record %s: %w", name, err)
		}
		*f = fh
	}
	// One write per line, synced: a crash never leaves half a record
	// followed by a whole one.
	if _, err := (*f).Write(append(b, '\n')); err != nil {
		r.errs = append(r.errs, err)
		return fmt.Errorf("record %s: %w", name, err)
	}
	if err := (*f).Sync(); err != nil {
		return fmt.Errorf("record %s: %w", name, err)
	}
	return nil
}

// Close ends the run: attempts never finished keep their events (flushed)
// without a result, the manifest gets its end time, and files are closed.
// It returns every recording error of the run, joined. Idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	open := slices.Collect(maps.Keys(r.open))
	r.mu.Unlock()
	for _, a := range open {
		a.abandon()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifest.Ended = r.opts.now().UTC()
	errs := r.errs
	if err := r.writeManifest(); err != nil {
		errs = append(errs, fmt.Errorf("write run manifest: %w", err))
	}
	for _, f := range []*os.File{r.results, r.parks} {
		if f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (r *Recorder) finished(a *Attempt, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.open, a)
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Attempt records one attempt of a job. Event may be called from the turn's
// event callback; Finish ends it.
type Attempt struct {
	rec      *Recorder
	job      string
	n        int
	dir      string
	maxBytes int64

	mu        sync.Mutex
	err       error
	done      bool
	f         *os.File
	w         *bufio.Writer
	traj      Trajectory
	lastSeq   int64
	patchName string
	patchOver int
	prompt    string
}

// Prompt records the prompt this attempt was sent when it is not the job's
// (Recorder.Input), as AttemptResult.Prompt.
func (a *Attempt) Prompt(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prompt = cutPrompt(p)
}

// Number returns the attempt number (0 when the attempt could not be
// recorded).
func (a *Attempt) Number() int { return a.n }

// Dir returns the attempt's directory ("" when it could not be recorded).
func (a *Attempt) Dir() string { return a.dir }

// Event appends one event to the trajectory. Past the cap, one marker line
// is written and later events are counted, not kept.
func (a *Attempt) Event(ev adapters.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil || a.done {
		return
	}
	if a.traj.Truncated {
		a.traj.Dropped++
		return
	}
	if a.f == nil && !a.openEvents() {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		a.err = fmt.Errorf("record event: %w", err)
		return
	}
	b = append(b, '\n')
	if a.traj.Bytes+int64(len(b)) > a.maxBytes-markerReserved {
		a.traj.Truncated, a.traj.Dropped = true, 1
		m, _ := json.Marshal(Truncated{Type: TruncatedType, AfterSeq: a.lastSeq, LimitBytes: a.maxBytes})
		b = append(m, '\n')
	} else {
		a.traj.Events++
		a.lastSeq = ev.Seq
	}
	if _, err := a.w.Write(b); err != nil {
		a.err = fmt.Errorf("record event: %w", err)
		return
	}
	a.traj.Bytes += int64(len(b))
}

func (a *Attempt) openEvents() bool {
	f, err := os.OpenFile(filepath.Join(a.dir, EventsFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, filePerm)
	if err != nil {
		a.err = fmt.Errorf("record events: %w", err)
		return false
	}
	a.f, a.w = f, bufio.NewWriterSize(f, 64<<10)
	return true
}

// Patch keeps the attempt's patch (a unified diff). A patch over the cap is
// not kept; the result says its size.
func (a *Attempt) Patch(diff []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil || a.done {
		return a.err
	}
	if len(diff) > a.rec.opts.maxPatch {
		a.patchOver = len(diff)
		return nil
	}
	if err := atomicfile.Write(filepath.Join(a.dir, PatchFile), diff, filePerm); err != nil {
		a.err = fmt.Errorf("record patch: %w", err)
		return a.err
	}
	a.patchName = PatchFile
	return nil
}

// Finish ends the attempt with the turn's result (nil: none): the
// trajectory is flushed, the stderr tail and result.json are written, and
// the turn's patch (Result.Patch, a task workspace's) is kept unless
// [Attempt.Patch] kept one already. It returns the attempt's first
// recording error. Idempotent.
func (a *Attempt) Finish(res *harness.Result) error {
	if res != nil && res.Patch != nil {
		a.mu.Lock()
		kept := a.patchName != "" || a.patchOver > 0
		if !kept && res.Patch.Omitted {
			a.patchOver, kept = res.Patch.Bytes, true
		}
		a.mu.Unlock()
		if !kept && len(res.Patch.Diff) > 0 {
			_ = a.Patch(res.Patch.Diff) // an error is the attempt's, returned below
		}
	}
	a.mu.Lock()
	if a.done {
		err := a.err
		a.mu.Unlock()
		return err
	}
	a.done = true
	if a.err == nil && a.f == nil {
		a.openEvents() // an attempt without events still has its (empty) trajectory
	}
	a.closeEvents()
	if a.err == nil {
		a.err = a.writeResult(res)
	}
	err := a.err
	a.mu.Unlock()
	if a.dir != "" {
		a.rec.finished(a, err)
	}
	return err
}

// abandon closes an attempt the run ended without finishing.
func (a *Attempt) abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return
	}
	a.done = true
	a.closeEvents()
}

func (a *Attempt) closeEvents() {
	if a.f == nil {
		return
	}
	err := a.w.Flush()
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f, a.w = nil, nil
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("record events: %w", err)
	}
}

func (a *Attempt) writeResult(res *harness.Result) error {
	ar := AttemptResult{Job: a.job, Attempt: a.n, Trajectory: a.traj, Patch: a.patchName, PatchOmitted: a.patchOver, Prompt: a.prompt}
	if res == nil {
		res = &harness.Result{Err: outposterr.New(outposterr.Aborted, "no result")}
	}
	ar.Agent, ar.Model, ar.Outcome = res.Agent, res.Model, res.Outcome()
	if !res.Started.IsZero() {
		ar.Started = res.Started.UTC()
	}
	ar.DurationMS, ar.Counts, ar.Warnings = res.Duration.Milliseconds(), res.Counts, res.Warnings
	if res.StderrTail != "" {
		if err := atomicfile.Write(filepath.Join(a.dir, StderrFile), []byte(res.StderrTail), filePerm); err != nil {
			return fmt.Errorf("record stderr: %w", err)
		}
		ar.Stderr = StderrFile
	}
	b, err := json.MarshalIndent(ar, "", "  ")
	if err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(a.dir, ResultFile), append(b, '\n'), filePerm); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	return nil
}
