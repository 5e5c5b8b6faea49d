// Package dataset turns evaluation datasets into Outpost jobs: SWE-bench
// rows plus local mirrors of their repositories become job lines with a
// source at the row's base commit and a verifier naming the tests that
// must now pass and those that must keep passing.
package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/internal/shquote"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

// SWEBenchRow is the part of a SWE-bench instance an import reads. Other
// fields (patch, hints_text, version, …) are ignored.
type SWEBenchRow struct {
	InstanceID       string   `json:"instance_id"`
	Repo             string   `json:"repo"`
	BaseCommit       string   `json:"base_commit"`
	ProblemStatement string   `json:"problem_statement"`
	FailToPass       TestList `json:"FAIL_TO_PASS"`
	PassToPass       TestList `json:"PASS_TO_PASS"`
	TestPatch        string   `json:"test_patch"`
}

// UnmarshalJSON reads a row, naming the list that does not read.
func (r *SWEBenchRow) UnmarshalJSON(b []byte) error {
	type plain SWEBenchRow
	var v struct {
		plain
		FailToPass json.RawMessage `json:"FAIL_TO_PASS"`
		PassToPass json.RawMessage `json:"PASS_TO_PASS"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = SWEBenchRow(v.plain)
	for _, l := range []struct {
		name string
		raw  json.RawMessage
		dst  *TestList
	}{{"FAIL_TO_PASS", v.FailToPass, &r.FailToPass}, {"PASS_TO_PASS", v.PassToPass, &r.PassToPass}} {
		if len(l.raw) == 0 || string(l.raw) == "null" {
			continue
		}
		if err := l.dst.UnmarshalJSON(l.raw); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
	}
	return nil
}

// TestList is a list of test names, read from a JSON array or from a
// string holding one (SWE-bench stores them so).
type TestList []string

// UnmarshalJSON accepts ["a","b"] and "[\"a\",\"b\"]".
func (l *TestList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			*l = nil
			return nil
		}
		b = []byte(s)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return errors.New("want a list of test names (a JSON array, or a string holding one)")
	}
	*l = out
	return nil
}

// DefaultTestCommand runs the row's tests with pytest, reporting every
// test's outcome (-rA) for the pytest parser. {tests} is replaced by the
// FAIL_TO_PASS and PASS_TO_PASS names, each quoted for sh.
const DefaultTestCommand = "python3 -m pytest -rA -p no:cacheprovider {tests}"

// SWEBenchOptions tune [ImportSWEBench].
type SWEBenchOptions struct {
	// Repos is the directory of local mirrors: a row's repository
	// owner/name is Repos/owner__name (SWE-bench's spelling), else
	// Repos/owner/name, else Repos/name — a git repository holding the
	// row's base commit.
	Repos string
	// Base is the directory of the jobs file written: mirror paths under
	// it are written relative to it, others absolute.
	Base string
	// Agent is every job's agent.
	Agent string
	// TestCommand is the verifier's command ("": [DefaultTestCommand]);
	// {tests} becomes the row's test names, quoted.
	TestCommand string
	// Attempts is every job's attempts (0: one).
	Attempts int
	// Timeout is the verifier's timeout (0: the default).
	Timeout time.Duration
	// Image is every job's image; Environment instead a build context
	// directory whose Dockerfile builds it (a job's "environment").
	Image, Environment string
}

var (
	// repoName is owner/name as GitHub spells them.
	repoName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	// commitID is a full commit id.
	commitID = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
)

// maxRow bounds one row of a dataset.
const maxRow = 64 << 20

// ImportSWEBench reads SWE-bench rows from r (a JSON array of rows, or
// one row per line) and calls emit with each row's job, in order: a
// [batch.Job] as a jobs file holds it, its mirror path relative to
// opts.Base when it lies under it. A row that lacks a field, names a
// repository without a mirror under opts.Repos, or a base commit the
// mirror lacks is a configuration error naming the row and what to do;
// nothing after it is read.
func ImportSWEBench(ctx context.Context, r io.Reader, opts SWEBenchOptions, emit func(batch.Job) error) (int, error) {
	if opts.Agent == "" {
		return 0, outposterr.New(outposterr.Configuration, "no agent for the jobs")
	}
	if opts.TestCommand == "" {
		opts.TestCommand = DefaultTestCommand
	}
	if opts.Image != "" && opts.Environment != "" {
		return 0, outposterr.New(outposterr.Configuration, "give an image or an environment to build one, not both")
	}
	if opts.Environment != "" {
		abs, err := filepath.Abs(opts.Environment)
		if err != nil {
			return 0, outposterr.Wrap(outposterr.Configuration, err, "environment")
		}
		if fi, err := os.Stat(filepath.Join(abs, "Dockerfile")); err != nil || !fi.Mode().IsRegular() {
			return 0, outposterr.New(outposterr.Configuration, "environment %s holds no Dockerfile", opts.Environment)
		}
		opts.Environment = relTo(opts.Base, abs)
	}
	br := bufio.NewReader(r)
	first, blank, err := firstByte(br)
	if err != nil {
		return 0, outposterr.Wrap(outposterr.Configuration, err, "read the dataset")
	}
	seen := map[string]bool{}
	n := 0
	one := func(where string, raw []byte) error {
		var row SWEBenchRow
		if err := json.Unmarshal(raw, &row); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "%s", where)
		}
		j, err := swebenchJob(ctx, row, opts)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "%s", where)
		}
		if seen[j.ID] {
			return outposterr.New(outposterr.Configuration, "%s: instance %s appears twice", where, j.ID)
		}
		seen[j.ID] = true
		n++
		return emit(j)
	}
	if first == '[' {
		dec := json.NewDecoder(br)
		if _, err := dec.Token(); err != nil {
			return 0, outposterr.Wrap(outposterr.Configuration, err, "read the dataset")
		}
		for i := 1; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return n, outposterr.Wrap(outposterr.Configuration, err, "dataset row %d", i)
			}
			if err := one(fmt.Sprintf("dataset row %d", i), raw); err != nil {
				return n, err
			}
		}
		// A file cut between two rows (a download that stopped) must not
		// pass for a smaller dataset, nor anything after the array go unread.
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			return n, outposterr.New(outposterr.Configuration, "the dataset's JSON array ends after row %d without its closing ]: the file is cut", n)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return n, outposterr.New(outposterr.Configuration, "text after the dataset's JSON array")
		}
		return n, nil
	}
	lr := lines.NewReader(br, maxRow)
	lr.OversizedAtOnce() // an oversized row ends the import: read no further
	for line := 1 + blank; ; line++ {
		b, over, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, outposterr.Wrap(outposterr.Configuration, err, "read the dataset")
		}
		if over {
			return n, outposterr.New(outposterr.Configuration, "dataset line %d: longer than %d bytes", line, maxRow)
		}
		raw := bytes.TrimSpace(b)
		if len(raw) == 0 {
			continue
		}
		if err := one(fmt.Sprintf("dataset line %d", line), raw); err != nil {
			return n, err
		}
	}
}

// firstByte peeks at the first byte that is not white space, and counts
// the line ends before it.
func firstByte(br *bufio.Reader) (byte, int, error) {
	lines := 0
	for {
		b, err := br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, lines, errors.New("the dataset is empty")
			}
			return 0, lines, err
		}
		switch b {
		case '\n':
			lines++
		case ' ', '\t', '\r':
		default:
			return b, lines, br.UnreadByte()
		}
	}
}

func swebenchJob(ctx context.Context, row SWEBenchRow, opts SWEBenchOptions) (batch.Job, error) {
	switch {
	case row.InstanceID == "":
		return batch.Job{}, errors.New("no instance_id")
	case !repoName.MatchString(row.Repo):
		return batch.Job{}, fmt.Errorf("instance %s: repo %q is not owner/name", row.InstanceID, row.Repo)
	case !commitID.MatchString(row.BaseCommit):
		return batch.Job{}, fmt.Errorf("instance %s: base_commit %q is not a full commit id", row.InstanceID, row.BaseCommit)
	case strings.TrimSpace(row.ProblemStatement) == "":
		return batch.Job{}, fmt.Errorf("instance %s: no problem_statement", row.InstanceID)
	case len(row.FailToPass) == 0:
		return batch.Job{}, fmt.Errorf("instance %s: FAIL_TO_PASS names no test (nothing would show a fix)", row.InstanceID)
	}
	mirror, err := findMirror(opts.Repos, row.Repo)
	if err != nil {
		return batch.Job{}, fmt.Errorf("instance %s: %w", row.InstanceID, err)
	}
	if err := hasCommit(ctx, mirror, row.BaseCommit); err != nil {
		return batch.Job{}, fmt.Errorf("instance %s: %w", row.InstanceID, err)
	}
	repo := relTo(opts.Base, mirror)
	tests := make([]string, 0, len(row.FailToPass)+len(row.PassToPass))
	for _, t := range append(append([]string{}, row.FailToPass...), row.PassToPass...) {
		tests = append(tests, shquote.Arg(t))
	}
	meta, _ := json.Marshal(map[string]string{"instance_id": row.InstanceID, "repo": row.Repo})
	var env *batch.EnvironmentSpec
	if opts.Environment != "" {
		env = &batch.EnvironmentSpec{Context: opts.Environment}
	}
	return batch.Job{
		ID: row.InstanceID, Agent: opts.Agent, Prompt: row.ProblemStatement,
		Image: opts.Image, Environment: env,
		Source:   &source.Spec{Repo: repo, Commit: row.BaseCommit},
		Attempts: opts.Attempts, Metadata: meta,
		Verify: &batch.VerifySpec{
			Command:    strings.ReplaceAll(opts.TestCommand, "{tests}", strings.Join(tests, " ")),
			Timeout:    batch.Duration(opts.Timeout),
			FailToPass: []string(row.FailToPass), PassToPass: []string(row.PassToPass),
			Parser: string(grading.Pytest), TestPatch: row.TestPatch,
		},
	}, nil
}

// relTo returns p relative to base when it lies under it, else p.
func relTo(base, p string) string {
	if base == "" {
		return p
	}
	if rel, err := filepath.Rel(base, p); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return p
}

// findMirror returns the mirror of owner/name under dir.
func findMirror(dir, repo string) (string, error) {
	owner, name, _ := strings.Cut(repo, "/")
	tried := []string{
		filepath.Join(dir, owner+"__"+name),
		filepath.Join(dir, owner, name),
		filepath.Join(dir, name),
	}
	for _, p := range tried {
		if isGitRepo(p) {
			abs, err := filepath.Abs(p)
			if err != nil {
				return "", err
			}
			return abs, nil
		}
	}
	return "", fmt.Errorf("no mirror of %s: looked for a git repository at %s; clone it there (git clone --mirror)", repo, strings.Join(tried, ", "))
}

// isGitRepo reports whether p is a work tree (p/.git) or a bare repository.
func isGitRepo(p string) bool {
	if fi, err := os.Stat(filepath.Join(p, ".git")); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		return true
	}
	fi, err := os.Stat(filepath.Join(p, "objects"))
	if err != nil || !fi.IsDir() {
		return false
	}
	_, err = os.Stat(filepath.Join(p, "HEAD"))
	return err == nil
}

// hasCommit checks that the repository at dir holds commit.
func hasCommit(ctx context.Context, dir, commit string) error {
	cmd := exec.CommandContext(ctx, "git", "-c", "safe.directory=*", "-C", dir, "cat-file", "-e", commit+"^{commit}")
	// No configuration of this machine's user: the answer is the mirror's.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "HOME=/nonexistent",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("the mirror %s lacks base_commit %s: fetch it (git -C %s fetch --all)", dir, commit, dir)
		}
		return fmt.Errorf("git cat-file in %s: %w", dir, err)
	}
	return nil
}
