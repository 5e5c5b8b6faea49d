package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/sandbox"
)

// Verdict is what a verifier said of an attempt.
type Verdict string

// Verdicts. An error is never a fail: the verifier itself could not say.
const (
	// VerdictPass: the verifier's command exited 0, or with test lists
	// every listed test passed (whatever the exit code).
	VerdictPass Verdict = "pass"
	// VerdictFail: it exited non-zero, or with test lists a listed test
	// did not pass, or the attempt's patch does not apply to the source.
	VerdictFail Verdict = "fail"
	// VerdictError: the verifier could not run (no lease, a source or test
	// files that could not be copied, a test patch that does not apply,
	// its command not found or not
	// executable — exit 126 or 127 —, killed by a signal or out of memory,
	// over its timeout, or a reward file that holds no number).
	VerdictError Verdict = "error"
)

// Defaults of a [Verifier].
const (
	DefaultVerifyTimeout = 10 * time.Minute
	// DefaultVerifyOutput bounds the tail of a verifier's output kept.
	DefaultVerifyOutput = 16 << 10
	// RewardFileEnv names the variable holding the path a verifier may
	// write its reward to.
	RewardFileEnv = "OUTPOST_REWARD_FILE"
)

// maxRewardBytes bounds a reward file read back.
const maxRewardBytes = 256

// Verifier grades an attempt in a lease of its own: the source, the
// attempt's patch, the test patch, then the test files over them, then the
// command.
type Verifier struct {
	// Command runs with sh -c in the workspace root.
	Command string
	// Files, when set, returns a tar archive of the test files (which the
	// agent never saw), extracted over the workspace after the patch: a
	// patch that changed them changes nothing. Called twice (the entries
	// are listed first).
	Files func(ctx context.Context) (io.ReadCloser, error)
	// Timeout bounds the command (0: DefaultVerifyTimeout).
	Timeout time.Duration
	// MaxOutput bounds the output tail kept (0: DefaultVerifyOutput).
	MaxOutput int
	// TestPatch, when set, is a diff applied with git apply after the
	// attempt's patch and before Files (SWE-bench's test_patch). The paths
	// it touches are first reset to the source's version (or removed when
	// the source has none), so an attempt that edited them is graded on
	// the real tests and cannot make the test patch fail to apply. A test
	// patch that does not apply then is the grader's fault: an error.
	TestPatch []byte
	// Tests, when set, grades the command's output instead of its exit
	// code (see package grading).
	Tests *TestLists
}

// TestLists are the tests a verifier's output is graded on: the verdict is
// pass exactly when every fail-to-pass and every pass-to-pass test passed
// (SWE-bench's "resolved"); a listed test the output does not report
// failed.
type TestLists struct {
	Parser     grading.Parser
	FailToPass []string
	PassToPass []string
}

// VerifyInput is one verification: a lease from Provider and Spec, seeded
// with Source (its archive; its Patch is the attempt's, applied with git
// apply), graded by Verifier.
type VerifyInput struct {
	Provider sandbox.Provider
	Spec     sandbox.Spec
	Source   Seed
	Verifier Verifier
}

// Verification is what a verifier said and how.
type Verification struct {
	// Verdict and Reward are carried at the top of a batch record; they
	// are not part of this object's JSON.
	Verdict Verdict  `json:"-"`
	Reward  *float64 `json:"-"`
	// ExitCode is the command's exit code (nil: it did not run or was
	// killed).
	ExitCode *int `json:"exit_code,omitempty"`
	// DurationMS is the verification's wall time: lease, copies, command.
	DurationMS int64 `json:"duration_ms"`
	// Output is the tail of the command's output (stdout and stderr).
	Output string `json:"output,omitempty"`
	// Error says why the verdict is error, or why a fail did not come
	// from the command (a patch that does not apply).
	Error string `json:"error,omitempty"`
	// Grading is the graded output of a verifier with test lists: each
	// listed test's outcome and the counts (nil: no lists, or the command
	// did not run).
	Grading *grading.Report `json:"grading,omitempty"`
}

// Verify runs one verification and returns its verdict; it never fails
// otherwise. The lease is released before it returns. The verdict is the
// command's exit code, or with Verifier.Tests its output's test outcomes,
// parsed line by line as it streams (the whole output, not only the tail
// kept). The reward is the number the command wrote to the file named by
// $OUTPOST_REWARD_FILE (a path in a fresh directory outside the workspace,
// made just before the command runs, so the attempt's patch cannot plant
// it), else 1 for pass and 0 for fail; an error has none.
func Verify(ctx context.Context, in VerifyInput) *Verification {
	start := time.Now()
	v := &Verification{}
	defer func() { v.DurationMS = time.Since(start).Milliseconds() }()
	pl, err := planVerification(in.Verifier)
	if err != nil {
		return v.fail(VerdictError, err)
	}
	actx, cancel := context.WithTimeout(ctx, pl.vf.Timeout+workspaceTimeout)
	sb, err := in.Provider.Acquire(actx, in.Spec)
	cancel()
	if err != nil {
		return v.fail(VerdictError, fmt.Errorf("acquire the verifier's sandbox: %w", err))
	}
	defer func() {
		c, cancel := withCleanup(ctx)
		_ = sb.Release(c)
		cancel()
	}()
	if in.Source.Tar == nil {
		return v.fail(VerdictError, errors.New("no source to verify"))
	}
	// Copies and the patch: bounded apart from the command's timeout.
	wctx, wcancel := context.WithTimeout(ctx, pl.vf.Timeout+workspaceTimeout)
	defer wcancel()
	if verdict, err := seedVerification(ctx, wctx, sb, in.Source, pl); err != nil {
		return v.fail(verdict, err)
	}
	dir := newScratch(sb.Home())
	td, err := materializeTurnFiles(wctx, sb, dir, nil)
	defer func() {
		c, cancel := withCleanup(ctx)
		_ = td.Close(c)
		cancel()
	}()
	if err != nil {
		return v.fail(VerdictError, fmt.Errorf("make the reward directory: %w", err))
	}
	rewardFile := path.Join(dir, "reward")
	if err := v.runVerifier(ctx, sb, pl, rewardFile); err != nil {
		return v.fail(VerdictError, err)
	}
	if err := v.judge(ctx, sb, rewardFile); err != nil {
		return v.fail(VerdictError, err)
	}
	return v
}

// fail ends v with verdict, and err as its Error; a fail's reward is 0,
// an error has none.
func (v *Verification) fail(verdict Verdict, err error) *Verification {
	v.Verdict, v.Error = verdict, err.Error()
	if verdict == VerdictFail {
		zero := 0.0
		v.Reward = &zero
	}
	return v
}

// verifyPlan is what Verify decides from the Verifier before it acquires
// a lease.
type verifyPlan struct {
	// vf is the Verifier with its defaults filled in.
	vf Verifier
	// grader grades the output against vf.Tests (nil: no test lists).
	grader *grading.Grader
	// testPaths are the paths vf.TestPatch touches.
	testPaths []string
}

// planVerification checks vf and resolves its defaults, the grader of its
// test lists and the paths its test patch touches; an error is the
// verifier's own, never the attempt's.
func planVerification(vf Verifier) (verifyPlan, error) {
	pl := verifyPlan{vf: vf}
	if strings.TrimSpace(vf.Command) == "" {
		return pl, errors.New("no verifier command")
	}
	if pl.vf.Timeout <= 0 {
		pl.vf.Timeout = DefaultVerifyTimeout
	}
	if pl.vf.MaxOutput <= 0 {
		pl.vf.MaxOutput = DefaultVerifyOutput
	}
	if vf.Tests != nil {
		g, err := grading.New(vf.Tests.Parser, vf.Tests.FailToPass, vf.Tests.PassToPass)
		if err != nil {
			return pl, fmt.Errorf("the verifier's tests: %w", err)
		}
		pl.grader = g
	}
	if len(vf.TestPatch) > 0 {
		p, err := grading.PatchPaths(string(vf.TestPatch))
		if err != nil {
			return pl, fmt.Errorf("the test patch: %w", err)
		}
		pl.testPaths = p
	}
	return pl, nil
}

// seedVerification lays out the workspace the command grades, bounded by
// wctx: the source, the attempt's patch, the test patch over the source's
// version of its paths, then the test files. The verdict that comes with
// an error is fail only when the attempt's patch does not apply; anything
// else (ctx ended, wctx ran out, no git, the grader's own files) is error.
func seedVerification(ctx, wctx context.Context, sb sandbox.Sandbox, src Seed, pl verifyPlan) (Verdict, error) {
	if err := copyArchive(wctx, sb, src.Tar); err != nil {
		return VerdictError, fmt.Errorf("copy the source into the verifier's sandbox: %w", err)
	}
	if len(src.Patch) > 0 {
		if err := applyPatch(wctx, sb, src.Patch); err != nil {
			if ctx.Err() != nil || errors.Is(wctx.Err(), context.DeadlineExceeded) || errors.As(err, new(gitNotRunError)) {
				return VerdictError, fmt.Errorf("apply the attempt's patch: %w", err)
			}
			return VerdictFail, fmt.Errorf("the attempt's patch does not apply to the source: %w", err)
		}
	}
	if len(pl.vf.TestPatch) > 0 {
		if err := resetPaths(wctx, sb, src.Tar, pl.testPaths); err != nil {
			return VerdictError, fmt.Errorf("reset the test patch's files to the source's: %w", err)
		}
		if err := applyPatch(wctx, sb, pl.vf.TestPatch); err != nil {
			return VerdictError, fmt.Errorf("the test patch does not apply to the source: %w", err)
		}
	}
	if pl.vf.Files != nil {
		if err := copyTestFiles(wctx, sb, pl.vf.Files); err != nil {
			return VerdictError, fmt.Errorf("copy the test files into the verifier's sandbox: %w", err)
		}
	}
	return "", nil
}

// runVerifier runs the command within its timeout, with rewardFile named
// by $OUTPOST_REWARD_FILE, and records its output tail, its grading and
// its exit code in v. An error (the verdict is error) is a command that
// did not run to an exit code of its own: interrupted, over its timeout,
// killed, or not found or not executable (exit 126 or 127).
func (v *Verification) runVerifier(ctx context.Context, sb sandbox.Sandbox, pl verifyPlan, rewardFile string) error {
	cctx, ccancel := context.WithTimeout(ctx, pl.vf.Timeout)
	defer ccancel()
	cmd := sandbox.Command{Args: []string{"sh", "-c", pl.vf.Command}, Dir: sb.Root(),
		Env: map[string]string{RewardFileEnv: rewardFile}}
	st, out, err := execTail(cctx, sb, cmd, pl.vf.MaxOutput, pl.grader)
	v.Output = out
	if pl.grader != nil {
		v.Grading = pl.grader.Report()
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("the verification was interrupted: %w", ctx.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the verifier ran over its timeout of %s", pl.vf.Timeout)
	case err != nil:
		return fmt.Errorf("run the verifier: %w", err)
	case st.OOMKilled || st.Signal != "":
		return fmt.Errorf("the verifier was %s", st)
	}
	code := st.Code
	v.ExitCode = &code
	if code == 126 || code == 127 {
		return fmt.Errorf("the verifier's command could not run (exit %d: not found or not executable)", code)
	}
	return nil
}

// judge sets v's verdict and reward once the command exited: pass on exit
// 0, or with test lists when the tests resolved; the reward is what the
// command wrote to rewardFile, else 1 for pass and 0 for fail. An error is
// a reward file that could not be read or holds no number.
func (v *Verification) judge(ctx context.Context, sb sandbox.Sandbox, rewardFile string) error {
	rctx, rcancel := withCleanup(ctx)
	defer rcancel()
	reward, found, rerr := readReward(rctx, sb, rewardFile)
	if rerr != nil {
		return fmt.Errorf("%s: %w", RewardFileEnv, rerr)
	}
	pass := *v.ExitCode == 0
	if v.Grading != nil {
		// The tests decide, not the exit code (a test run that fails
		// tests outside the lists exits non-zero).
		pass = v.Grading.Resolved()
	}
	v.Verdict = VerdictFail
	if pass {
		v.Verdict = VerdictPass
	}
	if !found {
		reward = 0
		if pass {
			reward = 1
		}
	}
	v.Reward = &reward
	return nil
}

// withCleanup is a bounded context for cleanup that outlives ctx's
// cancellation.
func withCleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// unlinkScript reads "TYPE PATH" lines (TYPE d for a directory, f for
// anything else; parents before children) and removes, in the workspace
// $1, what would make extracting the test files write elsewhere or fail: a
// symbolic link at any of their paths, a file where a directory goes, a
// directory where a file goes.
const unlinkScript = `cd "$1" || exit 1
while IFS= read -r line; do
  t=${line%% *}; p=${line#* }
  if [ -L "$p" ]; then rm -f -- "$p"
  elif [ "$t" = d ] && [ -e "$p" ] && [ ! -d "$p" ]; then rm -f -- "$p"
  elif [ "$t" != d ] && [ -d "$p" ]; then rm -rf -- "$p"
  fi
done`

// copyTestFiles extracts the test files over the workspace so that they
// win over whatever the patch did at their paths.
func copyTestFiles(ctx context.Context, sb sandbox.Sandbox, files func(context.Context) (io.ReadCloser, error)) error {
	var list bytes.Buffer
	err := eachTarEntry(ctx, files, func(h *tar.Header, name string, _ io.Reader) error {
		if strings.ContainsAny(name, "\n\x00") || name == "." || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "..") {
			return fmt.Errorf("test file name %q", h.Name)
		}
		t := "f"
		if h.Typeflag == tar.TypeDir {
			t = "d"
		}
		list.WriteString(t + " " + name + "\n")
		return nil
	})
	if err != nil {
		return err
	}
	if err := runPathScript(ctx, sb, unlinkScript, "outpost-unlink", list.Bytes(), "clear the test files' paths"); err != nil {
		return err
	}
	return copyArchive(ctx, sb, files)
}

// eachTarEntry opens an archive and calls fn with each entry's header, its
// cleaned name (no trailing slash) and a reader of its data, until the end
// or fn's error; the archive is closed when it returns.
func eachTarEntry(ctx context.Context, open func(context.Context) (io.ReadCloser, error), fn func(h *tar.Header, name string, data io.Reader) error) error {
	rc, err := open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, strings.TrimSuffix(path.Clean(h.Name), "/"), tr); err != nil {
			return err
		}
	}
}

// runPathScript runs script, which reads "TYPE PATH" lines, in the lease with
// the workspace root as its argument and list on its stdin; doing names
// what it does in its error.
func runPathScript(ctx context.Context, sb sandbox.Sandbox, script, name string, list []byte, doing string) error {
	_, stderr, st, err := execCapture(ctx, sb, sandbox.Command{Args: []string{"sh", "-c", script, name, sb.Root()}, Stdin: list}, 0)
	if err != nil {
		return err
	}
	if !st.Success() {
		return fmt.Errorf("%s: %s: %s", doing, st, strings.TrimSpace(stderr))
	}
	return nil
}

// readReward reads the reward file: found is false when the verifier
// wrote none; a file that holds no finite number is an error.
func readReward(ctx context.Context, sb sandbox.Sandbox, file string) (float64, bool, error) {
	script := `[ -e "$1" ] || exit 3; exec cat -- "$1"`
	out, stderr, st, err := execCapture(ctx, sb, sandbox.Command{Args: []string{"sh", "-c", script, "outpost-reward", file}}, maxRewardBytes)
	if err != nil {
		return 0, false, fmt.Errorf("read the reward file: %w", err)
	}
	if st.Code == 3 {
		return 0, false, nil
	}
	if !st.Success() {
		return 0, false, fmt.Errorf("read the reward file: %s: %s", st, strings.TrimSpace(stderr))
	}
	if len(out) > maxRewardBytes {
		return 0, false, fmt.Errorf("the reward file is over %d bytes: write one number", maxRewardBytes)
	}
	s := strings.TrimSpace(string(out))
	f, perr := strconv.ParseFloat(s, 64)
	if perr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("the reward file holds %q, not a number", s)
	}
	return f, true, nil
}

// execTail runs cmd and returns its exit status and the tail (at most max
// bytes) of its stdout and stderr together. With g, each of stdout and
// stderr is also parsed whole, line by line, as it streams, and g has read
// both to their end when execTail returns normally. When ctx ends the
// process is closed (killed) and ctx's error returned, with the output so
// far.
func execTail(ctx context.Context, sb sandbox.Sandbox, cmd sandbox.Command, max int, g *grading.Grader) (sandbox.ExitStatus, string, error) {
	p, err := sb.Exec(ctx, cmd)
	if err != nil {
		return sandbox.ExitStatus{}, "", err
	}
	defer p.Close()
	tail := &tailBuffer{max: max}
	type done struct {
		st  sandbox.ExitStatus
		err error
	}
	ch := make(chan done, 1)
	// stream copies r to the tail and, with g, to a parser of its own (so
	// that stdout's and stderr's lines never interleave).
	stream := func(r io.Reader) {
		if g == nil {
			_, _ = io.Copy(tail, r)
			return
		}
		pr, pw := io.Pipe()
		parsed := make(chan struct{})
		go func() {
			defer close(parsed)
			_ = g.Read(pr) // it drains pr to its end
		}()
		_, _ = io.Copy(io.MultiWriter(tail, pw), r)
		_ = pw.Close()
		<-parsed
	}
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { stream(p.Stderr()) })
		stream(p.Stdout())
		wg.Wait()
		st, err := p.Wait()
		ch <- done{st, err}
	}()
	select {
	case d := <-ch:
		return d.st, tail.String(), d.err
	case <-ctx.Done():
		_ = p.Close()
		return sandbox.ExitStatus{}, tail.String(), ctx.Err()
	}
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// writers.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.ToValidUTF8(string(t.b), "\uFFFD")
	if t.cut {
		s = "…" + s
	}
	return s
}

// resetScript reads "TYPE PATH" lines and, in the workspace $1, removes
// what is at each PATH of TYPE x (whatever it is), and for TYPE d (the
// parents of those paths, parents first) a symbolic link or a file where a
// directory goes.
const resetScript = `cd "$1" || exit 1
while IFS= read -r line; do
  t=${line%% *}; p=${line#* }
  if [ "$t" = x ]; then rm -rf -- "$p"
  elif [ -L "$p" ] || { [ -e "$p" ] && [ ! -d "$p" ]; }; then rm -f -- "$p"
  fi
done`

// resetPaths puts paths (cleaned, relative) back as the source has them:
// whatever the attempt's patch left at them is removed, then the source's
// entries at them (and their parent directories) are extracted again. A
// path the source does not have stays absent.
func resetPaths(ctx context.Context, sb sandbox.Sandbox, src func(context.Context) (io.ReadCloser, error), paths []string) error {
	want := map[string]bool{}
	parents := map[string]bool{}
	var list bytes.Buffer
	for _, p := range paths {
		if strings.ContainsAny(p, "\n\x00") {
			return fmt.Errorf("path %q", p)
		}
		want[p] = true
		var chain []string
		for d := path.Dir(p); d != "." && d != "/" && !parents[d]; d = path.Dir(d) {
			parents[d] = true
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			list.WriteString("d " + chain[i] + "\n")
		}
	}
	for _, p := range paths {
		list.WriteString("x " + p + "\n")
	}
	// The source's entries at those paths, and at their parents.
	var kept bytes.Buffer
	tw := tar.NewWriter(&kept)
	n := 0
	err := eachTarEntry(ctx, src, func(h *tar.Header, name string, data io.Reader) error {
		// A directory the test patch names is taken whole.
		inside := false
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if want[d] {
				inside = true
				break
			}
		}
		if !want[name] && !inside && !(parents[name] && h.Typeflag == tar.TypeDir) {
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, data); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := runPathScript(ctx, sb, resetScript, "outpost-reset", list.Bytes(), "remove the test patch's paths"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return copyArchive(ctx, sb, func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(kept.Bytes())), nil
	})
}
