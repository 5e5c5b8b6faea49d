// Package sandboxtest is the conformance suite of the [sandbox] contract.
// Every provider runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
//			return host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}})
//		})
//	}
//
// Each check is a t.Run sub-test with its own lease, released through
// t.Cleanup (which also checks that a second Release succeeds). The commands
// the suite runs inside a sandbox need only POSIX sh, coreutils (cat, stat,
// readlink, head, sleep, tr, pwd, test) and ps from procps; where /proc
// exists, /proc/*/cmdline is read as well. Image-based providers pass the base
// [sandbox.Spec] (image, user) with [WithSpec]; the suite sets Env and
// Workspace on copies of it. A provider whose leases cannot see this
// machine's files (a remote engine) passes [WithoutHostFiles].
//
// Processes are checked through the sandbox itself: a long-running command
// carries a unique marker in its argv ("sleep <number>"), and a later Exec
// lists every process's argv (ps -ww -eo args and /proc/*/cmdline) to check
// that none with the marker remains. Timing is never asserted; the only
// bounds are hang guards ([WithTimeout], default 20 s) that fail a test which
// would otherwise block forever.
//
// What the suite holds a provider to, beyond the doc comments of [sandbox]:
//   - Exec of an invalid [sandbox.Command] fails with an outposterr
//     configuration error; Exec, CopyIn and CopyOut after Release fail with
//     an outposterr sandbox error;
//   - HOME is Home(), which exists with mode 0700; the default working
//     directory is Root();
//   - a process killed by a signal reports Code -1 and the signal's name
//     ("SIGKILL", "SIGTERM");
//   - CopyIn gives entries the modes of the archive and makes them usable by
//     the sandbox's user whatever uid/gid the archive records (the suite's
//     archives say 0/0); it refuses absolute names, ".." components and
//     symbolic links leading outside the destination;
//   - CopyOut names entries relative to the parent of the path (a trailing
//     "/" on directories and a leading "./" are tolerated).
package sandboxtest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// DefaultTimeout is the hang guard of every blocking step.
const DefaultTimeout = 20 * time.Second

// Option configures [Run].
type Option func(*suite)

// WithSpec sets the base Spec of every lease the suite acquires. Its Env and
// Workspace are replaced where a sub-test needs them.
func WithSpec(spec sandbox.Spec) Option {
	return func(s *suite) { s.spec = spec }
}

// WithTimeout sets the hang guard (default [DefaultTimeout]); raise it for
// slow machines. It is a bound against hangs, never a performance assertion.
func WithTimeout(d time.Duration) Option {
	return func(s *suite) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithoutHostFiles declares a provider whose leases cannot see this
// machine's files (a remote engine, a cluster): the Workspace check then
// asks that a host Spec.Workspace is refused with a configuration error and
// that a lease without one starts with an empty, writable Root() that
// CopyIn can fill.
func WithoutHostFiles() Option {
	return func(s *suite) { s.noHostFiles = true }
}

type suite struct {
	newProvider func(t *testing.T) sandbox.Provider
	spec        sandbox.Spec
	timeout     time.Duration
	noHostFiles bool
}

// Run runs the conformance suite against the provider newProvider returns
// (called once per sub-test).
func Run(t *testing.T, newProvider func(t *testing.T) sandbox.Provider, opts ...Option) {
	t.Helper()
	s := &suite{newProvider: newProvider, timeout: DefaultTimeout}
	for _, o := range opts {
		o(s)
	}
	tests := []struct {
		name string
		f    func(*testing.T)
	}{
		{"Lease", s.testLease},
		{"ExecStdout", s.testExecStdout},
		{"ExitStatus", s.testExitStatus},
		{"ExitSignal", s.testExitSignal},
		{"StdoutStderrSeparate", s.testSeparateStreams},
		{"LargeOutput", s.testLargeOutput},
		{"OutputAfterWait", s.testOutputAfterWait},
		{"ConcurrentExec", s.testConcurrentExec},
		{"InvalidCommand", s.testInvalidCommand},
		{"Env", s.testEnv},
		{"EnvNotInArgv", s.testEnvNotInArgv},
		{"WorkingDir", s.testWorkingDir},
		{"Home", s.testHome},
		{"Workspace", s.testWorkspace},
		{"Stdin", s.testStdin},
		{"StdinEmpty", s.testStdinEmpty},
		{"StdinLive", s.testStdinLive},
		{"CopyRoundTrip", s.testCopyRoundTrip},
		{"CopyOutFile", s.testCopyOutFile},
		{"CopyOutMissing", s.testCopyOutMissing},
		{"CopyInRefusesUnsafe", s.testCopyInRefusesUnsafe},
		{"SignalReachesGroup", s.testSignalGroup},
		{"CancelKillsGroup", s.testCancelKillsGroup},
		{"DeadlineKillsGroup", s.testDeadlineKillsGroup},
		{"WaitIgnoresHeldStdout", s.testWaitIgnoresHeldStdout},
		{"ReleaseIdempotent", s.testReleaseIdempotent},
		{"ReleaseAfterCancel", s.testReleaseAfterCancel},
		{"ReleaseKillsProcesses", s.testReleaseKillsProcesses},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.f)
	}
}

// ---- helpers ----------------------------------------------------------------

// acquire leases a sandbox for spec and releases it (twice, to check
// idempotence) when the test ends.
func (s *suite) acquire(t *testing.T, p sandbox.Provider, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	sb, err := p.Acquire(ctx, spec)
	t.Cleanup(func() {
		if sb == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		assert.NoError(t, sb.Release(ctx), "release")
		assert.NoError(t, sb.Release(ctx), "second release")
	})
	require.NoError(t, err, "acquire")
	require.NotNil(t, sb)
	return sb
}

// lease acquires a sandbox from a fresh provider with the base spec.
func (s *suite) lease(t *testing.T) sandbox.Sandbox {
	t.Helper()
	return s.acquire(t, s.newProvider(t), s.baseSpec())
}

func (s *suite) baseSpec() sandbox.Spec {
	spec := s.spec
	spec.Env = nil
	return spec
}

// start execs cmd and closes the process when the test ends.
func (s *suite) start(ctx context.Context, t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) sandbox.Process {
	t.Helper()
	p, err := sb.Exec(ctx, cmd)
	t.Cleanup(func() {
		if p != nil {
			_ = p.Close()
		}
	})
	require.NoError(t, err, "exec %s", cmd.Redacted())
	require.NotNil(t, p)
	return p
}

// wait waits for p's own process, failing the test if it hangs.
func (s *suite) wait(t *testing.T, p sandbox.Process) sandbox.ExitStatus {
	t.Helper()
	type res struct {
		st  sandbox.ExitStatus
		err error
	}
	ch := make(chan res, 1)
	go func() {
		st, err := p.Wait()
		ch <- res{st, err}
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err, "wait")
		return r.st
	case <-time.After(s.timeout):
		t.Fatalf("Wait did not return within %v", s.timeout)
	}
	return sandbox.ExitStatus{}
}

// collect reads r to EOF in the background.
func collect(r io.Reader) <-chan string {
	ch := make(chan string, 1)
	go func() {
		var b []byte
		if r != nil {
			b, _ = io.ReadAll(r)
		}
		ch <- string(b)
	}()
	return ch
}

func (s *suite) recv(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(s.timeout):
		t.Fatalf("%s did not reach EOF within %v", what, s.timeout)
	}
	return ""
}

type result struct {
	Stdout, Stderr string
	Status         sandbox.ExitStatus
}

// run executes cmd to completion and returns its output and status.
func (s *suite) run(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p := s.start(ctx, t, sb, cmd)
	out, errOut := collect(p.Stdout()), collect(p.Stderr())
	st := s.wait(t, p)
	r := result{Stdout: s.recv(t, out, "stdout"), Stderr: s.recv(t, errOut, "stderr"), Status: st}
	require.NoError(t, p.Close(), "close")
	return r
}

// sh runs a shell script with positional arguments.
func (s *suite) sh(t *testing.T, sb sandbox.Sandbox, script string, args ...string) result {
	t.Helper()
	return s.run(t, sb, sandbox.Command{Args: append([]string{"sh", "-c", script, "sh"}, args...)})
}

// mustSh runs a script that must succeed and returns its stdout.
func (s *suite) mustSh(t *testing.T, sb sandbox.Sandbox, script string, args ...string) string {
	t.Helper()
	r := s.sh(t, sb, script, args...)
	require.True(t, r.Status.Success(), "script %q: %s\nstdout: %s\nstderr: %s", script, r.Status, r.Stdout, r.Stderr)
	return r.Stdout
}

// listScript prints the argv of every process the sandbox can see, one per
// line: ps where present, else /proc/*/cmdline. Its own argv holds no marker.
const listScript = `if command -v ps >/dev/null 2>&1; then ps -ww -eo args 2>/dev/null || ps -eo args; ` +
	`else for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done; fi; true`

// processes returns the argv of every process visible in sb.
func (s *suite) processes(t *testing.T, sb sandbox.Sandbox) []string {
	t.Helper()
	var out []string
	for l := range strings.SplitSeq(s.mustSh(t, sb, listScript), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// marker returns a unique sleep duration; "sleep <marker>" in a process
// list identifies processes of one test.
func marker() string {
	return strconv.Itoa(10_000_000 + rand.IntN(80_000_000))
}

// waitGone fails the test unless, within the hang guard, no process whose
// argv contains "sleep <m>" is left in sb.
func (s *suite) waitGone(t *testing.T, sb sandbox.Sandbox, m string) {
	t.Helper()
	needle := "sleep " + m
	var left []string
	s.poll(t, func() bool {
		left = left[:0]
		for _, l := range s.processes(t, sb) {
			if strings.Contains(l, needle) {
				left = append(left, l)
			}
		}
		return len(left) == 0
	}, func() string {
		return fmt.Sprintf("processes with %q still running:\n%s", needle, strings.Join(left, "\n"))
	})
}

// waitPresent waits until n processes run exactly "sleep <m>".
func (s *suite) waitPresent(t *testing.T, sb sandbox.Sandbox, m string, n int) {
	t.Helper()
	needle := "sleep " + m
	s.poll(t, func() bool {
		c := 0
		for _, l := range s.processes(t, sb) {
			if l == needle {
				c++
			}
		}
		return c >= n
	}, func() string { return fmt.Sprintf("fewer than %d processes %q", n, needle) })
}

// poll calls cond until it holds, failing the test with msg() after the
// hang guard.
func (s *suite) poll(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(s.timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", s.timeout, msg())
		}
		<-tick.C
	}
}

// readLine reads one line from br, failing the test if none comes.
func (s *suite) readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := br.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(s.timeout):
		t.Fatalf("no output line within %v", s.timeout)
	}
	return ""
}

// ---- tar building -----------------------------------------------------------

type entry struct {
	name     string
	typ      byte
	mode     int64
	body     string
	linkname string
}

func tarOf(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.linkname,
			ModTime: time.Unix(1_700_000_000, 0)}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return &buf
}

// readTar parses a CopyOut stream into entries keyed by normalized name.
func readTar(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "read CopyOut archive")
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		e := entry{name: name, typ: h.Typeflag, mode: h.Mode & 0o777, linkname: h.Linkname}
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA { //nolint:staticcheck // accept old-style entries
			e.typ = tar.TypeReg
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			e.body = string(b)
		}
		out[name] = e
	}
	return out
}

func (s *suite) copyOut(t *testing.T, sb sandbox.Sandbox, p string) map[string]entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	rc, err := sb.CopyOut(ctx, p)
	require.NoError(t, err, "copy out %s", p)
	defer rc.Close()
	return readTar(t, rc)
}

func (s *suite) copyIn(t *testing.T, sb sandbox.Sandbox, dir string, r io.Reader) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	return sb.CopyIn(ctx, dir, r)
}

// ---- tests --------------------------------------------------------------------

func (s *suite) testLease(t *testing.T) {
	p := s.newProvider(t)
	require.NotEmpty(t, p.Name())
	a := s.acquire(t, p, s.baseSpec())
	b := s.acquire(t, p, s.baseSpec())
	assert.NotEmpty(t, a.ID())
	assert.NotEqual(t, a.ID(), b.ID(), "leases have distinct ids")
	assert.True(t, path.IsAbs(a.Home()), "Home %q is absolute", a.Home())
	assert.True(t, path.IsAbs(a.Root()), "Root %q is absolute", a.Root())
}

func (s *suite) testExecStdout(t *testing.T) {
	sb := s.lease(t)
	r := s.run(t, sb, sandbox.Command{Args: []string{"echo", "hello", "wide world"}})
	assert.Equal(t, "hello wide world\n", r.Stdout)
	assert.Empty(t, r.Stderr)
	assert.Equal(t, sandbox.ExitStatus{Code: 0}, r.Status)
	assert.True(t, r.Status.Success())
}

func (s *suite) testExitStatus(t *testing.T) {
	sb := s.lease(t)
	r := s.sh(t, sb, "exit 3")
	assert.Equal(t, sandbox.ExitStatus{Code: 3}, r.Status)
	assert.False(t, r.Status.Success())
	r = s.sh(t, sb, "exit 0")
	assert.Equal(t, sandbox.ExitStatus{Code: 0}, r.Status)
}

func (s *suite) testExitSignal(t *testing.T) {
	sb := s.lease(t)
	r := s.sh(t, sb, "kill -KILL $$")
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, r.Status)
	assert.False(t, r.Status.Success())
}

func (s *suite) testSeparateStreams(t *testing.T) {
	sb := s.lease(t)
	r := s.sh(t, sb, "echo out; echo err >&2; echo out2; echo err2 >&2")
	assert.Equal(t, "out\nout2\n", r.Stdout)
	assert.Equal(t, "err\nerr2\n", r.Stderr)
	assert.True(t, r.Status.Success())
}

func (s *suite) testLargeOutput(t *testing.T) {
	sb := s.lease(t)
	// Both streams exceed any pipe buffer; the caller reads them concurrently.
	r := s.sh(t, sb, "head -c 1048576 /dev/zero | tr '\\0' o & head -c 1048576 /dev/zero | tr '\\0' e >&2; wait")
	require.True(t, r.Status.Success(), "status %s stderr %.200q", r.Status, r.Stderr)
	assert.Equal(t, 1<<20, len(r.Stdout))
	assert.Equal(t, 1<<20, len(r.Stderr))
	assert.Equal(t, strings.Repeat("o", 1<<20), r.Stdout)
	assert.Equal(t, strings.Repeat("e", 1<<20), r.Stderr)
}

func (s *suite) testOutputAfterWait(t *testing.T) {
	sb := s.lease(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", "echo last words; echo on stderr >&2; exit 7"}})
	// Nobody reads until the process exited: its output must still be there.
	assert.Equal(t, sandbox.ExitStatus{Code: 7}, s.wait(t, p))
	assert.Equal(t, "last words\n", s.recv(t, collect(p.Stdout()), "stdout"))
	assert.Equal(t, "on stderr\n", s.recv(t, collect(p.Stderr()), "stderr"))
	require.NoError(t, p.Close())
}

func (s *suite) testConcurrentExec(t *testing.T) {
	sb := s.lease(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	first := s.start(ctx, t, sb, sandbox.Command{Args: []string{"cat"}, KeepStdinOpen: true})
	out := collect(first.Stdout())
	r := s.run(t, sb, sandbox.Command{Args: []string{"echo", "second"}})
	assert.Equal(t, "second\n", r.Stdout, "a lease runs a command while another one is running")
	_, err := io.WriteString(first.Stdin(), "first\n")
	require.NoError(t, err)
	require.NoError(t, first.Stdin().Close())
	assert.Equal(t, sandbox.ExitStatus{}, s.wait(t, first))
	assert.Equal(t, "first\n", s.recv(t, out, "stdout"))
}

func (s *suite) testInvalidCommand(t *testing.T) {
	sb := s.lease(t)
	ctx := context.Background()
	for name, cmd := range map[string]sandbox.Command{
		"no args":      {},
		"empty prog":   {Args: []string{""}},
		"bad env name": {Args: []string{"true"}, Env: map[string]string{"BAD-NAME": "x"}},
		"env with =":   {Args: []string{"true"}, Env: map[string]string{"A=B": "x"}},
	} {
		p, err := sb.Exec(ctx, cmd)
		if p != nil {
			_ = p.Close()
		}
		assert.Error(t, err, name)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: want a configuration error, got %v", name, err)
	}
}

func (s *suite) testEnv(t *testing.T) {
	spec := s.baseSpec()
	spec.Env = map[string]string{"OUTPOST_SPEC_ONLY": "from spec", "OUTPOST_BOTH": "spec"}
	sb := s.acquire(t, s.newProvider(t), spec)
	r := s.run(t, sb, sandbox.Command{
		Args: []string{"sh", "-c", `printf '%s|%s|%s|%s' "$OUTPOST_SPEC_ONLY" "$OUTPOST_BOTH" "$OUTPOST_CMD_ONLY" "$HOME"`},
		Env:  map[string]string{"OUTPOST_BOTH": "command", "OUTPOST_CMD_ONLY": "it's \"quoted\" $HOME `x`"},
	})
	require.True(t, r.Status.Success(), "%s: %s", r.Status, r.Stderr)
	assert.Equal(t, "from spec|command|it's \"quoted\" $HOME `x`|"+sb.Home(), r.Stdout,
		"Spec.Env delivered, Command.Env wins, values verbatim, HOME is Home()")
}

func (s *suite) testEnvNotInArgv(t *testing.T) {
	cmdSecret := "outpost-cmd-secret-" + marker()
	specSecret := "outpost-spec-secret-" + marker()
	spec := s.baseSpec()
	spec.Env = map[string]string{"OUTPOST_SPEC_SECRET": specSecret}
	sb := s.acquire(t, s.newProvider(t), spec)

	// A second process holding the secret stays alive while the list is taken.
	m := marker()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	holder := s.start(ctx, t, sb, sandbox.Command{
		Args: []string{"sh", "-c", `exec sleep "$1"`, "sh", m},
		Env:  map[string]string{"OUTPOST_CMD_SECRET": cmdSecret},
	})
	s.waitPresent(t, sb, m, 1)

	r := s.run(t, sb, sandbox.Command{
		Args: []string{"sh", "-c", listScript + `; printf '%s %s' "$OUTPOST_CMD_SECRET" "$OUTPOST_SPEC_SECRET" >&2`},
		Env:  map[string]string{"OUTPOST_CMD_SECRET": cmdSecret},
	})
	require.True(t, r.Status.Success(), "%s: %s", r.Status, r.Stderr)
	list := r.Stdout
	assert.Contains(t, list, "sleep "+m, "the process list includes the holder")
	assert.NotContains(t, list, cmdSecret, "a Command.Env value appears in some argv")
	assert.NotContains(t, list, specSecret, "a Spec.Env value appears in some argv")
	assert.Equal(t, cmdSecret+" "+specSecret, r.Stderr, "the process received both values")

	require.NoError(t, holder.Signal(syscall.SIGKILL))
	s.wait(t, holder)
}

func (s *suite) testWorkingDir(t *testing.T) {
	sb := s.lease(t)
	// pwd -P on both sides, so a symbolic link in Root does not matter.
	const same = `test "$(pwd -P)" = "$(cd "$1" && pwd -P)" && echo same || { pwd -P; echo "want $1"; }`
	assert.Equal(t, "same\n", s.mustSh(t, sb, same, sb.Root()), "default working directory is Root()")
	r := s.run(t, sb, sandbox.Command{Args: []string{"sh", "-c", same, "sh", sb.Home()}, Dir: sb.Home()})
	assert.Equal(t, "same\n", r.Stdout, "Command.Dir is honoured")
}

func (s *suite) testHome(t *testing.T) {
	sb := s.lease(t)
	assert.Equal(t, "700\n", s.mustSh(t, sb, `stat -c %a "$1"`, sb.Home()), "Home() has mode 0700")
	assert.Equal(t, sb.Home(), s.mustSh(t, sb, `printf %s "$HOME"`), "HOME is Home()")
	assert.Equal(t, "ok\n", s.mustSh(t, sb, `echo x > "$HOME/.outpost-probe" && test -d "$1" && echo ok`, sb.Root()),
		"Home() is writable and Root() exists")
}

func (s *suite) testWorkspace(t *testing.T) {
	if s.noHostFiles {
		s.testCopiedWorkspace(t)
		return
	}
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "from-host.txt"), []byte("host data\n"), 0o644))
	spec := s.baseSpec()
	spec.Workspace = ws
	p := s.newProvider(t)
	sb := s.acquire(t, p, spec)
	assert.Equal(t, "host data\n", s.mustSh(t, sb, "cat from-host.txt"), "the workspace is Root()")
	s.mustSh(t, sb, "echo sandbox data > from-sandbox.txt")
	b, err := os.ReadFile(filepath.Join(ws, "from-sandbox.txt"))
	require.NoError(t, err, "a file written in Root() appears in the workspace")
	assert.Equal(t, "sandbox data\n", string(b))

	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	require.NoError(t, sb.Release(ctx))
	_, err = os.Stat(filepath.Join(ws, "from-host.txt"))
	assert.NoError(t, err, "Release keeps a caller-provided workspace")
	_, err = os.Stat(filepath.Join(ws, "from-sandbox.txt"))
	assert.NoError(t, err, "Release keeps a caller-provided workspace")
}

// testCopiedWorkspace is the Workspace check of a provider without host files.
func (s *suite) testCopiedWorkspace(t *testing.T) {
	spec := s.baseSpec()
	spec.Workspace = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	sb, err := s.newProvider(t).Acquire(ctx, spec)
	if sb != nil {
		_ = sb.Release(ctx)
	}
	require.Error(t, err, "a host workspace is refused")
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "a host workspace is a configuration error: %v", err)

	sb = s.lease(t)
	assert.Equal(t, "empty\n", s.mustSh(t, sb, `if [ -z "$(ls -A .)" ]; then echo empty; fi`), "Root() starts empty")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "from-host.txt", Mode: 0o644, Size: 10, Typeflag: tar.TypeReg}))
	_, err = tw.Write([]byte("host data\n"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, sb.CopyIn(ctx, sb.Root(), &buf))
	assert.Equal(t, "host data\n", s.mustSh(t, sb, "cat from-host.txt"), "CopyIn fills Root()")
	s.mustSh(t, sb, "echo sandbox data > from-sandbox.txt")
}

func (s *suite) testStdin(t *testing.T) {
	sb := s.lease(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"cat"}, Stdin: []byte("hello\nworld\n")})
	assert.Nil(t, p.Stdin(), "Stdin() is nil without KeepStdinOpen")
	out := collect(p.Stdout())
	st := s.wait(t, p) // cat exits: stdin was closed after the input
	assert.Equal(t, sandbox.ExitStatus{}, st)
	assert.Equal(t, "hello\nworld\n", s.recv(t, out, "stdout"))
	require.NoError(t, p.Close())

	// Larger than any pipe buffer: written while cat reads.
	big := strings.Repeat("0123456789abcde\n", 64<<10)
	r := s.run(t, sb, sandbox.Command{Args: []string{"cat"}, Stdin: []byte(big)})
	assert.True(t, r.Status.Success())
	assert.Equal(t, len(big), len(r.Stdout))
	assert.Equal(t, big, r.Stdout)
}

func (s *suite) testStdinEmpty(t *testing.T) {
	sb := s.lease(t)
	r := s.run(t, sb, sandbox.Command{Args: []string{"cat"}})
	assert.Equal(t, sandbox.ExitStatus{}, r.Status, "cat with no input exits")
	assert.Empty(t, r.Stdout)
}

func (s *suite) testStdinLive(t *testing.T) {
	sb := s.lease(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"cat"}, Stdin: []byte("first\n"), KeepStdinOpen: true})
	in := p.Stdin()
	require.NotNil(t, in, "Stdin() with KeepStdinOpen")
	br := bufio.NewReader(p.Stdout())
	assert.Equal(t, "first\n", s.readLine(t, br), "Command.Stdin is written first")
	_, err := io.WriteString(in, "second\n")
	require.NoError(t, err)
	assert.Equal(t, "second\n", s.readLine(t, br), "live input is delivered while the process runs")
	require.NoError(t, in.Close())
	assert.Equal(t, sandbox.ExitStatus{}, s.wait(t, p), "closing Stdin() ends the input")
	rest := collect(br)
	assert.Empty(t, s.recv(t, rest, "stdout"))
}

// roundTrip is the tree CopyRoundTrip copies in and out.
var roundTrip = []entry{
	{name: "rt/", typ: tar.TypeDir, mode: 0o700},
	{name: "rt/private", typ: tar.TypeReg, mode: 0o600, body: "secret\n"},
	{name: "rt/tool.sh", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh\necho tool ran\n"},
	{name: "rt/sub/", typ: tar.TypeDir, mode: 0o755},
	{name: "rt/sub/data", typ: tar.TypeReg, mode: 0o644, body: "data"},
	{name: "rt/link", typ: tar.TypeSymlink, mode: 0o777, linkname: "private"},
}

func (s *suite) testCopyRoundTrip(t *testing.T) {
	sb := s.lease(t)
	require.NoError(t, s.copyIn(t, sb, sb.Root(), tarOf(t, roundTrip...)), "copy in")

	// Inside the sandbox: modes, link, usable by the sandbox's user.
	stat := s.mustSh(t, sb, `cd "$1" && stat -c '%n %a' rt rt/private rt/tool.sh rt/sub rt/sub/data && readlink rt/link && cat rt/link && ./rt/tool.sh`, sb.Root())
	assert.Equal(t, "rt 700\nrt/private 600\nrt/tool.sh 755\nrt/sub 755\nrt/sub/data 644\nprivate\nsecret\ntool ran\n", stat)

	got := s.copyOut(t, sb, path.Join(sb.Root(), "rt"))
	want := map[string]entry{}
	for _, e := range roundTrip {
		e.name = strings.TrimSuffix(e.name, "/")
		if e.typ == tar.TypeSymlink {
			e.mode = 0 // link modes are meaningless; not compared
		}
		want[e.name] = e
	}
	for name, g := range got {
		if g.typ == tar.TypeSymlink {
			g.mode = 0
			got[name] = g
		}
	}
	assert.Equal(t, want, got, "CopyOut returns the tree, named relative to the parent of the path")
}

func (s *suite) testCopyOutFile(t *testing.T) {
	sb := s.lease(t)
	s.mustSh(t, sb, `printf 'one file' > "$1/single" && chmod 640 "$1/single"`, sb.Root())
	got := s.copyOut(t, sb, path.Join(sb.Root(), "single"))
	assert.Equal(t, map[string]entry{"single": {name: "single", typ: tar.TypeReg, mode: 0o640, body: "one file"}}, got)
}

func (s *suite) testCopyOutMissing(t *testing.T) {
	sb := s.lease(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	rc, err := sb.CopyOut(ctx, path.Join(sb.Root(), "does-not-exist"))
	if err == nil {
		// A provider may report the failure through the stream instead.
		_, err = io.ReadAll(rc)
		_ = rc.Close()
	}
	assert.Error(t, err, "CopyOut of a missing path fails")
}

func (s *suite) testCopyInRefusesUnsafe(t *testing.T) {
	sb := s.lease(t)
	require.NoError(t, s.copyIn(t, sb, sb.Root(), tarOf(t, entry{name: "in/", typ: tar.TypeDir, mode: 0o755})))
	dest := path.Join(sb.Root(), "in")
	id := marker()
	cases := []struct {
		name    string
		entries []entry
		escape  string // must not exist afterwards
	}{
		{"dotdot", []entry{{name: "../escaped-" + id, typ: tar.TypeReg, mode: 0o644, body: "x"}},
			path.Join(sb.Root(), "escaped-"+id)},
		{"dotdot inside", []entry{{name: "a/../../escaped2-" + id, typ: tar.TypeReg, mode: 0o644, body: "x"}},
			path.Join(sb.Root(), "escaped2-"+id)},
		{"absolute", []entry{{name: path.Join(sb.Root(), "absolute-"+id), typ: tar.TypeReg, mode: 0o644, body: "x"}},
			path.Join(sb.Root(), "absolute-"+id)},
		{"symlink escape", []entry{
			{name: "esc", typ: tar.TypeSymlink, linkname: "../../../../../../../../../../" + strings.TrimPrefix(sb.Root(), "/")},
			{name: "esc/linked-" + id, typ: tar.TypeReg, mode: 0o644, body: "x"},
		}, path.Join(sb.Root(), "linked-"+id)},
		{"absolute symlink", []entry{
			{name: "abs", typ: tar.TypeSymlink, linkname: sb.Root()},
			{name: "abs/abslinked-" + id, typ: tar.TypeReg, mode: 0o644, body: "x"},
		}, path.Join(sb.Root(), "abslinked-"+id)},
	}
	for _, tc := range cases {
		err := s.copyIn(t, sb, dest, tarOf(t, tc.entries...))
		assert.Error(t, err, "%s: CopyIn must refuse the archive", tc.name)
		r := s.sh(t, sb, `test -e "$1" || test -L "$1"`, tc.escape)
		assert.NotEqual(t, 0, r.Status.Code, "%s: %s was written outside the destination", tc.name, tc.escape)
	}
}

// groupScript starts two background sleeps with the marker, reports ready,
// and waits. Its own argv ($0) carries the marker too.
const groupScript = `sleep "$1" & sleep "$1" & echo ready; wait`

func (s *suite) startGroup(ctx context.Context, t *testing.T, sb sandbox.Sandbox, m string) (sandbox.Process, <-chan string) {
	t.Helper()
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", groupScript, "sleep " + m, m}})
	br := bufio.NewReader(p.Stdout())
	require.Equal(t, "ready\n", s.readLine(t, br))
	s.waitPresent(t, sb, m, 2)
	return p, collect(br)
}

func (s *suite) testSignalGroup(t *testing.T) {
	sb := s.lease(t)
	m := marker()
	p, _ := s.startGroup(context.Background(), t, sb, m)
	require.NoError(t, p.Signal(syscall.SIGTERM))
	st := s.wait(t, p)
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGTERM"}, st)
	s.waitGone(t, sb, m) // the signal reached the children, before any Close
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	assert.NoError(t, p.Signal(syscall.SIGTERM), "signalling a finished group is not an error")

	// A plain process that exits on SIGTERM reports it.
	m2 := marker()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p2 := s.start(ctx, t, sb, sandbox.Command{Args: []string{"sleep", m2}})
	s.waitPresent(t, sb, m2, 1)
	require.NoError(t, p2.Signal(syscall.SIGTERM))
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGTERM"}, s.wait(t, p2))
}

func (s *suite) testCancelKillsGroup(t *testing.T) {
	sb := s.lease(t)
	m := marker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, out := s.startGroup(ctx, t, sb, m)
	cancel()
	st := s.wait(t, p)
	assert.False(t, st.Success(), "a cancelled command does not succeed: %s", st)
	s.waitGone(t, sb, m) // the whole group, before any Close
	require.NoError(t, p.Close())
	s.recv(t, out, "stdout after Close")
}

func (s *suite) testDeadlineKillsGroup(t *testing.T) {
	sb := s.lease(t)
	m := marker()
	// Long enough for any provider to start the command, short next to the guard.
	ctx, cancel := context.WithTimeout(context.Background(), max(3*time.Second, s.timeout/5))
	defer cancel()
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", groupScript, "sleep " + m, m}})
	out := collect(p.Stdout())
	st := s.wait(t, p)
	assert.False(t, st.Success(), "a command past its deadline does not succeed: %s", st)
	assert.Error(t, ctx.Err(), "the command ended by the deadline")
	s.waitGone(t, sb, m)
	require.NoError(t, p.Close())
	s.recv(t, out, "stdout after Close")
}

func (s *suite) testWaitIgnoresHeldStdout(t *testing.T) {
	sb := s.lease(t)
	m := marker()
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.timeout)
	defer cancel()
	// The grandchild inherits stdout and stderr and outlives the shell.
	p := s.start(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", `sleep "$1" & echo started`, "sh", m}})
	br := bufio.NewReader(p.Stdout())
	errOut := collect(p.Stderr())
	assert.Equal(t, "started\n", s.readLine(t, br))
	assert.Equal(t, sandbox.ExitStatus{}, s.wait(t, p), "Wait returns when the shell exits")
	s.waitPresent(t, sb, m, 1) // the grandchild still runs and holds stdout
	out := collect(br)
	require.NoError(t, p.Close())
	assert.Empty(t, s.recv(t, out, "stdout after Close"), "Close unblocks Stdout")
	s.recv(t, errOut, "stderr after Close")
	s.waitGone(t, sb, m)
	st, err := p.Wait()
	require.NoError(t, err)
	assert.Equal(t, sandbox.ExitStatus{}, st, "Wait may be called again")
}

func (s *suite) testReleaseIdempotent(t *testing.T) {
	sb := s.lease(t)
	s.mustSh(t, sb, "true")
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	require.NoError(t, sb.Release(ctx))
	require.NoError(t, sb.Release(ctx), "second Release")
	s.checkReleased(t, sb)
}

func (s *suite) testReleaseAfterCancel(t *testing.T) {
	p := s.newProvider(t)
	sb := s.acquire(t, p, s.baseSpec())
	s.mustSh(t, sb, "true")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, sb.Release(ctx), "Release with a cancelled context still cleans up")
	require.NoError(t, sb.Release(ctx), "second Release")
	s.checkReleased(t, sb)
}

func (s *suite) testReleaseKillsProcesses(t *testing.T) {
	p := s.newProvider(t)
	sb := s.acquire(t, p, s.baseSpec())
	observer := s.acquire(t, p, s.baseSpec())
	m := marker()
	proc, out := s.startGroup(context.Background(), t, sb, m)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	require.NoError(t, sb.Release(ctx))
	st := s.wait(t, proc)
	assert.False(t, st.Success(), "a process killed by Release does not succeed: %s", st)
	// Visible from another lease only where leases share a process table
	// (the host); isolated providers pass trivially.
	s.waitGone(t, observer, m)
	require.NoError(t, proc.Close())
	s.recv(t, out, "stdout after Close")
}

// checkReleased checks that a released lease refuses work with a sandbox error.
func (s *suite) checkReleased(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if p != nil {
		_ = p.Close()
	}
	require.Error(t, err, "Exec after Release")
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "Exec after Release: want a sandbox error, got %v", err)

	err = sb.CopyIn(ctx, sb.Root(), tarOf(t, entry{name: "late", typ: tar.TypeReg, mode: 0o644, body: "x"}))
	require.Error(t, err, "CopyIn after Release")
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "CopyIn after Release: want a sandbox error, got %v", err)

	rc, err := sb.CopyOut(ctx, sb.Root())
	if err == nil {
		_, err = io.ReadAll(rc)
		_ = rc.Close()
	}
	require.Error(t, err, "CopyOut after Release")
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "CopyOut after Release: want a sandbox error, got %v", err)
}
