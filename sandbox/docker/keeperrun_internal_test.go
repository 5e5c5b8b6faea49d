package docker

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// TestReportWriters: each stream passes its output through unchanged up
// to its report line, whatever pieces it is written in, then ends its pipe
// and drops what follows; stderr's report is the exit status, given once.
// A stream that ends without its report loses nothing; a line too long to
// be a report is output.
func TestReportWriters(t *testing.T) {
	const nonce = "n0nce"
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		// Output that holds pieces of the markers, their start byte, and
		// a fake report with another nonce.
		pieces := []string{"plain text ", "\x1e", runExitMark[:3], runEndMark + "n0n", runExitMark + "other:1:0\n", "\n"}
		var wantOut, wantErr strings.Builder
		for range rng.IntN(12) {
			wantOut.WriteString(pieces[rng.IntN(len(pieces))])
			wantErr.WriteString(pieces[rng.IntN(len(pieces))])
		}
		withReport := i%3 != 0
		stdout, stderr := wantOut.String(), wantErr.String()
		if withReport {
			stdout += runEndMark + nonce + ":\n" + "after the report"
			stderr += runExitMark + nonce + ":137:1\n" + "after the report"
		}
		out, errOut := leasekit.NewPipe(), leasekit.NewPipe()
		var exits []runExit
		outw, errw := reportWriters(out, errOut, nonce, func(e runExit) { exits = append(exits, e) })
		for _, c := range []struct {
			w    *leasekit.Markers
			data string
		}{{outw, stdout}, {errw, stderr}} {
			for rest := []byte(c.data); len(rest) > 0; {
				n := 1 + rng.IntN(min(len(rest), 9))
				k, err := c.w.Write(rest[:n])
				require.NoError(t, err)
				require.Equal(t, n, k)
				rest = rest[n:]
			}
			c.w.Flush()
		}
		if !withReport {
			out.CloseWrite()
			errOut.CloseWrite()
		}
		gotOut, err := io.ReadAll(out)
		require.NoError(t, err)
		gotErr, err := io.ReadAll(errOut)
		require.NoError(t, err)
		assert.Equal(t, wantOut.String(), string(gotOut), "case %d: %q", i, stdout)
		assert.Equal(t, wantErr.String(), string(gotErr), "case %d: %q", i, stderr)
		if withReport {
			assert.Equal(t, []runExit{{code: 137, leftovers: true}}, exits, "case %d", i)
		} else {
			assert.Empty(t, exits, "case %d", i)
		}
	}

	// A line longer than a report is output, not a report.
	long := runExitMark + nonce + ":" + strings.Repeat("9", maxReportField+1) + "\n"
	out, errOut := leasekit.NewPipe(), leasekit.NewPipe()
	var exits []runExit
	_, errw := reportWriters(out, errOut, nonce, func(e runExit) { exits = append(exits, e) })
	_, _ = errw.Write([]byte(long))
	errw.Flush()
	errOut.CloseWrite()
	got, err := io.ReadAll(errOut)
	require.NoError(t, err)
	assert.Equal(t, long, string(got))
	assert.Empty(t, exits)
}

// TestParseRunExit: the keeper's status report.
func TestParseRunExit(t *testing.T) {
	assert.Equal(t, runExit{code: 3}, parseRunExit("3:0"))
	assert.Equal(t, runExit{code: 137, leftovers: true}, parseRunExit("137:1"))
	assert.Equal(t, runExit{neverRan: true}, parseRunExit("x:0"))
	for _, bad := range []string{"", "3", "3:2", "-1:0", "256:0", "a:0"} {
		assert.True(t, parseRunExit(bad).bad, bad)
	}
}

// TestKeeperRunsScript runs the keeper's script with this machine's sh
// and gives it a command as the provider does: the argv, environment,
// working directory and stdin arrive as they were, however they are
// quoted; the output ends with the reports; the status and the group's
// leftovers are reported; a missing directory is reported as never run.
func TestKeeperRunsScript(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	odd := "it's \"$HOME\" `id` \\n\nline two $(x) *"
	cases := []struct {
		name             string
		argv             []string
		dir              string
		stdin            string
		wantOut, wantErr string
		status           string
	}{
		{
			name:    "argv env stdin dir",
			argv:    []string{"sh", "-c", `printf '%s|' "$1" "$ODD" "$(pwd)"; cat; echo err >&2; exit 3`, "x", odd},
			dir:     dir,
			stdin:   odd + "\n\tend",
			wantOut: odd + "|" + odd + "|" + dir + "|" + odd + "\n\tend",
			wantErr: "err\n",
			status:  "3:0",
		},
		{
			name:    "no trailing newline, no stdin",
			argv:    []string{"sh", "-c", `printf partial; cat`},
			dir:     "/",
			wantOut: "partial",
			status:  "0:0",
		},
		{
			name:   "killed by a signal",
			argv:   []string{"sh", "-c", `kill -9 $$`},
			dir:    "/",
			status: "137:0",
		},
		{
			name:   "leaves a process behind that holds its output",
			argv:   []string{"sh", "-c", `sleep 60 & exit 0`},
			dir:    "/",
			status: "0:1",
		},
		{
			name:   "leaves a process behind that closed its output",
			argv:   []string{"sh", "-c", `sleep 60 >/dev/null 2>&1 & exit 0`},
			dir:    "/",
			status: "0:0",
		},
		{
			name:   "no such directory",
			argv:   []string{"true"},
			dir:    filepath.Join(dir, "missing"),
			status: "x:0",
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pidBase := filepath.Join(dir, "run"+strconv.Itoa(i))
			nonce := "n0nce" + strconv.Itoa(i)
			script := runScript(c.argv, map[string]string{"ODD": odd}, c.dir, pidBase, nonce, []byte(c.stdin))
			keeper := exec.Command("sh", "-c", keeperScript, "outpost-keeper")
			keeper.Env = append(os.Environ(), "ODD=not this one")
			// The keeper's watcher kills its process group when its
			// input ends: its own group, not this test's.
			keeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			in, err := keeper.StdinPipe()
			require.NoError(t, err)
			// Files, read as the keeper writes them.
			stdout, stderr := outFile(t, dir, "out"+strconv.Itoa(i)), outFile(t, dir, "err"+strconv.Itoa(i))
			keeper.Stdout, keeper.Stderr = stdout.f, stderr.f
			require.NoError(t, keeper.Start())
			t.Cleanup(func() { _ = keeper.Process.Kill(); _ = keeper.Wait() })
			_, err = io.WriteString(in, "outpost-run "+strconv.Itoa(len(script))+"\n"+script)
			require.NoError(t, err)

			var reports []string
			var out, errOut bytes.Buffer
			take := func(reported *[]string) func(string) (bool, bool) {
				return func(f string) (bool, bool) { *reported = append(*reported, f); return true, true }
			}
			outw := &leasekit.Markers{W: &out, Prefix: []byte(runEndMark + nonce + ":"), End: '\n', Max: maxReportField,
				DropAfter: true, Take: take(new([]string))}
			errw := &leasekit.Markers{W: &errOut, Prefix: []byte(runExitMark + nonce + ":"), End: '\n', Max: maxReportField,
				DropAfter: true, Take: take(&reports)}
			// The keeper's first line, then the command's output.
			require.Eventually(t, func() bool {
				return strings.Contains(stderr.String(), runExitMark+nonce) && strings.Contains(stdout.String(), runEndMark+nonce)
			},
				testWait, tick, "no reports: out %q err %q", stdout.String(), stderr.String())
			first, rest, _ := strings.Cut(stdout.String(), "\n")
			assert.Equal(t, keeperRuns, first)
			_, _ = outw.Write([]byte(rest))
			_, _ = errw.Write([]byte(stderr.String()))
			assert.Equal(t, c.wantOut, out.String())
			assert.Equal(t, c.wantErr, errOut.String())
			assert.Equal(t, []string{c.status}, reports)
			if strings.HasPrefix(c.name, "leaves") {
				g, err := os.ReadFile(pidBase + ".pid")
				require.NoError(t, err)
				pgid, err := strconv.Atoi(strings.TrimSpace(string(g)))
				require.NoError(t, err)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_, err = os.Stat(pidBase + ".in")
			assert.True(t, os.IsNotExist(err), "the stdin file is removed")
			// The keeper still holds its input, and ends at its end.
			require.NoError(t, in.Close())
			require.NoError(t, keeper.Wait())
		})
	}
}

// The bounds of the waits above: generous, for a loaded machine.
const (
	testWait = time.Minute
	tick     = 5 * time.Millisecond
)

// growingFile is a file a process writes to and a test reads as it grows.
type growingFile struct{ f *os.File }

func outFile(t *testing.T, dir, name string) growingFile {
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return growingFile{f}
}

func (o growingFile) String() string {
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// TestKeeperEndsWithItsInput: while the keeper runs a command, its input
// (the lifeline) is still watched: when it ends, the keeper and its group
// end, without waiting for the command.
func TestKeeperEndsWithItsInput(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	pidBase := filepath.Join(dir, "run")
	script := runScript([]string{"sleep", "600"}, nil, dir, pidBase, "n0nce", nil)
	keeper := exec.Command("sh", "-c", keeperScript, "outpost-keeper")
	keeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := keeper.StdinPipe()
	require.NoError(t, err)
	// A file, not a pipe this test copies from: the command, in a
	// session of its own, outlives the keeper here (in a lease, the
	// container's end ends it) and would hold a pipe open.
	out, err := os.Create(filepath.Join(dir, "stdout"))
	require.NoError(t, err)
	defer out.Close()
	keeper.Stdout = out
	require.NoError(t, keeper.Start())
	t.Cleanup(func() { _ = syscall.Kill(-keeper.Process.Pid, syscall.SIGKILL) })
	_, err = io.WriteString(in, "outpost-run "+strconv.Itoa(len(script))+"\n"+script)
	require.NoError(t, err)
	require.Eventually(t, func() bool { b, err := os.ReadFile(pidBase + ".pid"); return err == nil && len(b) > 0 }, testWait, tick)
	g, err := os.ReadFile(pidBase + ".pid")
	require.NoError(t, err)
	sleeper, err := strconv.Atoi(strings.TrimSpace(string(g)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(-sleeper, syscall.SIGKILL) })

	require.NoError(t, in.Close())
	err = keeper.Wait()
	require.Error(t, err, "the keeper is killed")
	assert.Contains(t, err.Error(), "killed")
	got, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	assert.Equal(t, keeperRuns+"\n", string(got), "no report: the command did not end")
}

// TestKeeperRunsTheFirstCommandOnly: a lease's keeper runs its first
// command that can go that way, with the output and status an exec would
// give; a command that keeps its stdin open is an exec and leaves the
// keeper free; every command after the keeper's is an exec.
func TestKeeperRunsTheFirstCommandOnly(t *testing.T) {
	testenv.Short(t)
	p := localProvider(t)
	if p.flavor == flavorPodman {
		t.Skip("on Podman every command is an exec")
	}
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })

	live, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"cat"}, KeepStdinOpen: true})
	require.NoError(t, err)
	assert.IsType(t, &process{}, live, "a live stdin needs an exec")
	_, _ = io.WriteString(live.Stdin(), "live\n")
	require.NoError(t, live.Stdin().Close())
	out, _ := io.ReadAll(live.Stdout())
	assert.Equal(t, "live\n", string(out))
	_, _ = live.Wait()
	require.NoError(t, live.Close())

	for i, want := range []any{&runProc{}, &process{}, &process{}} {
		pr, err := sb.Exec(context.Background(), sandbox.Command{
			Args: []string{"sh", "-c", `cat; echo "$V" >&2; exit 4`}, Env: map[string]string{"V": "env " + strconv.Itoa(i)},
			Stdin: []byte("in " + strconv.Itoa(i)),
		})
		require.NoError(t, err)
		assert.IsType(t, want, pr, "command %d", i)
		errOut := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(pr.Stderr()); errOut <- b }()
		out, _ := io.ReadAll(pr.Stdout())
		st, err := pr.Wait()
		require.NoError(t, err)
		assert.Equal(t, sandbox.ExitStatus{Code: 4}, st)
		assert.Equal(t, "in "+strconv.Itoa(i), string(out))
		assert.Equal(t, "env "+strconv.Itoa(i)+"\n", string(<-errOut))
		require.NoError(t, pr.Close())
	}
}
