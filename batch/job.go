package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/source"
	"github.com/outpost-dev/outpost/typed"
)

// MaxAttempts bounds Job.Attempts.
const MaxAttempts = 1000

// Job is one unit of work: one line of a jobs file. Unknown fields are an
// error where jobs are read (a typo must not pass as a default).
type Job struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
	// Workspace is a host directory the agent works in, in place (shared
	// by every attempt). Source instead gives each attempt a fresh copy.
	Workspace string `json:"workspace,omitempty"`
	// Source makes each attempt's workspace a fresh copy of a git checkout
	// at a commit or of a directory, copied into its lease (package
	// source). Local paths must be absolute here; the outpost command
	// resolves them against the jobs file's directory.
	Source *source.Spec `json:"source,omitempty"`
	Model  string       `json:"model,omitempty"`
	Effort string       `json:"effort,omitempty"`
	// Conversation continues an existing conversation.
	Conversation string `json:"conversation,omitempty"`
	// Fallback agents are tried in order on quota and outage failures.
	Fallback []string `json:"fallback,omitempty"`
	// Schema asks for a typed response: a JSON Schema the answer must match
	// (the outcome then carries its value). Compile checks it once.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Metadata is any JSON object, copied unchanged into the job's result
	// lines (metadata.instance_id names the task in predictions).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Timeout bounds the job: its turns (retries, resumed parks) share it;
	// time parked or backing off does not count (0: Options.JobTimeout).
	// IdleTimeout bounds each turn's silence (0: the default).
	Timeout     Duration `json:"timeout,omitempty"`
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// Env names more variables to forward into the sandbox (names only).
	Env []string `json:"env,omitempty"`
	// Image, CPUs, Memory and Pids override the lease's container image and
	// limits (0: the defaults and flags).
	Image string `json:"image,omitempty"`
	// Environment builds the job's image from a Dockerfile instead of
	// naming one (not both); the image then serves the agent's and the
	// verifier's leases (see [EnvironmentSpec]).
	Environment *EnvironmentSpec `json:"environment,omitempty"`
	CPUs        float64          `json:"cpus,omitempty"`
	Memory      Bytes            `json:"memory,omitempty"`
	Pids        int64            `json:"pids,omitempty"`
	// MaxCostUSD and MaxTurns cap the job's cost and each of its turns'
	// assistant turns (0: Options.MaxJobCostUSD, Options.MaxTurns).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	MaxTurns   int     `json:"max_turns,omitempty"`
	// MaxTokens caps the job's tokens of every class, summed over its turns
	// (0: Options.MaxJobTokens). It needs no price.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// Attempts runs K independent trials of the job (0 or 1: one), each
	// with its own id (ID#1 … ID#K), workspace and conversation.
	Attempts int `json:"attempts,omitempty"`
	// Verify grades each attempt in a lease of its own once its last turn
	// ended (Options.Verify); it needs a git source.
	Verify *VerifySpec `json:"verify,omitempty"`

	// Compiled is Schema compiled by [Job.Compile]; nil without a schema.
	Compiled *typed.Schema `json:"-"`
	// Load, when set, returns the job's Prompt and Metadata, which were
	// left out when the job was read: a batch then holds the large parts
	// of a job only while it runs, so a jobs file of any size costs memory
	// for its running jobs, not for all of them. The batch calls it as the
	// job starts; an error fails the job as a configuration error.
	Load func() (prompt string, metadata json.RawMessage, err error) `json:"-"`
	// Task is the id before expansion and Trial the trial number (1..K)
	// of a job [Expand] made from one with Attempts > 1; zero otherwise.
	Task  string `json:"-"`
	Trial int    `json:"-"`
}

// maxJobID bounds a job id.
const maxJobID = 256

// Compile checks a job and compiles its schema into Compiled. [Run] calls
// it for jobs not compiled yet; callers that read jobs call it once to
// report a bad job before anything runs.
func (j *Job) Compile() error {
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "job %s: "+format, append([]any{j.ID}, args...)...)
	}
	switch {
	case j.ID == "":
		return outposterr.New(outposterr.Configuration, "job without an id")
	case len(j.ID) > maxJobID:
		return outposterr.New(outposterr.Configuration, "job id of %d bytes: at most %d", len(j.ID), maxJobID)
	case !utf8.ValidString(j.ID) || strings.IndexFunc(j.ID, unicode.IsControl) >= 0:
		// Ids are printed on terminals and written to results: no escape
		// sequences, no line breaks, no invalid text.
		return outposterr.New(outposterr.Configuration, "job id %q: use printable text (no control characters)", j.ID)
	case invisibleIn(j.ID) != 0:
		// Nor text that prints as something it is not: "a\u202eb" shows
		// reversed, "a\u200bb" as "ab".
		return outposterr.New(outposterr.Configuration,
			"job id %+q holds U+%04X, an invisible formatting or bidirectional-override character (the id would print as something it is not): use visible text",
			j.ID, invisibleIn(j.ID))
	case j.Agent == "":
		return bad("no agent")
	case strings.TrimSpace(j.Prompt) == "" && j.Load == nil:
		return bad("empty prompt")
	case j.Source != nil && j.Workspace != "":
		return bad("give workspace (in place) or source (a fresh copy), not both")
	case j.Attempts < 0 || j.Attempts > MaxAttempts:
		return bad("attempts must be between 1 and %d", MaxAttempts)
	case j.Timeout < 0 || j.IdleTimeout < 0:
		return bad("negative timeout")
	case j.CPUs < 0 || math.IsNaN(j.CPUs) || math.IsInf(j.CPUs, 0) || j.Memory < 0 || j.Pids < 0:
		return bad("cpus, memory and pids must be positive")
	case j.MaxCostUSD < 0 || math.IsNaN(j.MaxCostUSD) || math.IsInf(j.MaxCostUSD, 0) || j.MaxTurns < 0 || j.MaxTokens < 0:
		return bad("max_cost_usd, max_tokens and max_turns must be positive")
	}
	if j.Source != nil {
		if err := j.Source.Validate(); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
		}
	}
	if err := j.Verify.check(j); err != nil {
		return err
	}
	if err := j.Environment.check(j); err != nil {
		return err
	}
	for _, name := range j.Env {
		if !sandbox.ValidEnvName(name) {
			return bad("env takes variable names, not %q (values never go in a jobs file)", credentials.ShownName(name))
		}
		if credentials.Reserved(name) {
			return bad("env %s is reserved: Outpost or the sandbox sets it, or it loads other code", name)
		}
	}
	if t := bytes.TrimSpace(j.Metadata); string(t) == "null" {
		j.Metadata = nil // as if absent
	} else if len(j.Metadata) > 0 && (len(t) == 0 || t[0] != '{' || !json.Valid(t)) {
		return bad("metadata must be a JSON object")
	}
	if len(j.Schema) > 0 && j.Compiled == nil {
		s, err := typed.Compile(j.Schema)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "job %s: schema", j.ID)
		}
		j.Compiled = s
	}
	return nil
}

// invisibleIn returns the first invisible formatting character of s (see
// [adapters.Invisible]), or 0.
func invisibleIn(s string) rune {
	r, _ := adapters.Invisible(s)
	return r
}

// Expand returns jobs with every job of Attempts K > 1 replaced by K
// trials with ids ID#1 … ID#K (Task and Trial set, Attempts cleared).
// Ids must stay unique.
func Expand(jobs []Job) ([]Job, error) {
	var out []Job
	seen := map[string]bool{}
	add := func(j Job) error {
		if seen[j.ID] {
			return outposterr.New(outposterr.Configuration, "duplicate job id %q", j.ID)
		}
		seen[j.ID] = true
		out = append(out, j)
		return nil
	}
	for _, j := range jobs {
		if j.Attempts <= 1 {
			j.Attempts = 0
			if err := add(j); err != nil {
				return nil, err
			}
			continue
		}
		// The job's own id names its task: no other job may have it.
		if seen[j.ID] {
			return nil, outposterr.New(outposterr.Configuration, "duplicate job id %q", j.ID)
		}
		seen[j.ID] = true
		for k := 1; k <= j.Attempts; k++ {
			t := j
			t.Task, t.Trial, t.Attempts = j.ID, k, 0
			t.ID = j.ID + "#" + strconv.Itoa(k)
			if err := add(t); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Duration is a time.Duration read from JSON as a Go duration string
// ("90s", "30m") or a number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts "30m" or 1800.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want \"30m\" or a number of seconds")
	}
	if math.IsNaN(secs) || math.Abs(secs) > float64(math.MaxInt64/int64(time.Second)) {
		return fmt.Errorf("duration %v out of range", secs)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Bytes is a size read from JSON as a number of bytes or a string with a
// unit: "512m", "2g", "1.5GiB", "800MB" (k, m, g, t are powers of 1024).
type Bytes int64

// UnmarshalJSON accepts 536870912 or "512m".
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var n int64
	if err := json.Unmarshal(data, &n); err == nil {
		*b = Bytes(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("size: want bytes or a string such as \"2g\"")
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = Bytes(v)
	return nil
}

// ParseBytes parses "512m", "2g", "1.5GiB", "800MB" or "1024".
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 || math.IsNaN(f) || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit k, m, g or t", s)
	}
	return int64(f * float64(mult)), nil
}

// VerifySpec is a job's verifier: a command run with sh -c in a fresh
// lease holding the job's source, the attempt's patch and then the test
// files over them (see harness.Verify).
type VerifySpec struct {
	Command string `json:"command"`
	// Files is a directory of test files the agent never saw, extracted
	// over the workspace after the patch (absolute here; the outpost
	// command resolves it against the jobs file's directory).
	Files string `json:"files,omitempty"`
	// Timeout bounds the command (0: harness.DefaultVerifyTimeout).
	Timeout Duration `json:"timeout,omitempty"`
	// Image is the lease's image (empty: the job's).
	Image string `json:"image,omitempty"`
	// Network is the lease's network (empty: "none").
	Network string `json:"network,omitempty"`
	// FailToPass and PassToPass, with Parser, grade the command's output
	// instead of its exit code: the verdict is pass exactly when every
	// listed test passed (SWE-bench's "resolved"; see package grading).
	FailToPass []string `json:"fail_to_pass,omitempty"`
	PassToPass []string `json:"pass_to_pass,omitempty"`
	// Parser reads the command's output: "pytest" or "go-test-json".
	Parser string `json:"parser,omitempty"`
	// TestPatch is a unified diff applied after the attempt's patch and
	// before Files (SWE-bench's test_patch); see harness.Verifier.
	TestPatch string `json:"test_patch,omitempty"`
}

// Bounds of a verifier.
const (
	maxVerifyCommand = 64 << 10
	// MaxTestPatch bounds a verifier's test_patch.
	MaxTestPatch = 8 << 20
)

func (v *VerifySpec) check(j *Job) error {
	if v == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "job %s: verify: "+format, append([]any{j.ID}, args...)...)
	}
	switch {
	case j.Source == nil:
		return bad("a verifier grades the patch of a job's source: give the job a \"source\" ({\"repo\",\"commit\"})")
	case !j.Source.Git():
		return bad("a source dir yields no patch to grade: make the directory a git repository and name it as {\"repo\": DIR, \"commit\": …}")
	case strings.TrimSpace(v.Command) == "":
		return bad("no command")
	case len(v.Command) > maxVerifyCommand || strings.ContainsRune(v.Command, 0):
		return bad("the command is over %d KiB or holds a NUL byte", maxVerifyCommand>>10)
	case v.Timeout < 0:
		return bad("negative timeout")
	case v.Files != "" && !filepath.IsAbs(v.Files):
		return bad("files %q is not absolute", v.Files)
	case strings.ContainsAny(v.Image+v.Network, "\x00\n\r"):
		return bad("image and network take one line of text")
	case len(v.TestPatch) > MaxTestPatch || strings.ContainsRune(v.TestPatch, 0):
		return bad("test_patch is over %d MiB or holds a NUL byte", MaxTestPatch>>20)
	}
	if v.TestPatch != "" {
		if _, err := grading.PatchPaths(v.TestPatch); err != nil {
			return bad("test_patch: %v", err)
		}
	}
	lists := len(v.FailToPass)+len(v.PassToPass) > 0
	switch {
	case lists && v.Parser == "":
		return bad("fail_to_pass and pass_to_pass need a parser: give \"parser\": %q or %q", grading.Pytest, grading.GoTestJSON)
	case v.Parser != "" && !grading.Parser(v.Parser).Valid():
		return bad("parser %q is not known: use %q or %q", v.Parser, grading.Pytest, grading.GoTestJSON)
	case v.Parser != "" && !lists:
		return bad("a parser grades the tests of fail_to_pass and pass_to_pass: list at least one")
	case lists:
		if err := grading.CheckLists(grading.Parser(v.Parser), v.FailToPass, v.PassToPass); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// EnvironmentSpec is a job's task environment: an image built from a
// Dockerfile and its build context, once per content (the outpost command
// tags it by a hash of both, labels it and reuses it: see
// sandbox/kinds.EnsureTaskImage), then set as the job's Image in its
// place. A build that fails fails the batch before anything runs; a
// runner refuses a job whose environment is still unbuilt.
type EnvironmentSpec struct {
	// Dockerfile is the recipe (absolute here; the outpost command
	// resolves it against the jobs file's directory). Empty: Context's
	// Dockerfile.
	Dockerfile string `json:"dockerfile,omitempty"`
	// Context is the build context directory (absolute here). Empty: the
	// Dockerfile's directory.
	Context string `json:"context,omitempty"`
}

// Paths returns the build context and the Dockerfile's path relative to
// it, or an error when the Dockerfile lies outside the context.
func (e EnvironmentSpec) Paths() (contextDir, dockerfile string, err error) {
	contextDir, file := e.Context, e.Dockerfile
	switch {
	case contextDir == "" && file == "":
		return "", "", errors.New("give a dockerfile, a context directory or both")
	case contextDir == "":
		contextDir = filepath.Dir(file)
	case file == "":
		file = filepath.Join(contextDir, "Dockerfile")
	}
	rel, err := filepath.Rel(contextDir, file)
	if err != nil || !filepath.IsLocal(rel) {
		return "", "", fmt.Errorf("the dockerfile %s is outside the build context %s", file, contextDir)
	}
	return contextDir, rel, nil
}

func (e *EnvironmentSpec) check(j *Job) error {
	if e == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "job %s: environment: "+format, append([]any{j.ID}, args...)...)
	}
	if j.Image != "" {
		return bad("give an image or an environment to build one, not both")
	}
	for _, p := range []string{e.Dockerfile, e.Context} {
		if p != "" && !filepath.IsAbs(p) {
			return bad("%q is not absolute", p)
		}
	}
	if _, _, err := e.Paths(); err != nil {
		return bad("%v", err)
	}
	return nil
}
