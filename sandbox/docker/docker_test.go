package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// engine returns a client for the engine under test (the local Docker
// engine, unless TestPodman or TestSSHEngine set another), or skips (fails
// in CI with the engine's OUTPOST_REQUIRE_* variable) when a real ping does
// not answer quickly or the base image is missing.
func engine(t *testing.T) *client.Client {
	t.Helper()
	e := current()
	cli, err := docker.NewEndpointClient(e.endpoint)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		testenv.Missing(t, e.require, e.what+" ("+err.Error()+")")
	}
	if _, err := cli.ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Missing(t, e.require, "image "+docker.DefaultImage+" in the "+e.what+" ("+e.setup+")")
	}
	return cli
}

// newProvider returns a provider with its own run id whose leases are all
// released at the end of the test.
func newProvider(t *testing.T, opts docker.Options) *docker.Provider {
	t.Helper()
	cli := engine(t)
	if opts.Client == nil && opts.Host == "" {
		opts.Client = cli
	}
	if opts.Network == "" {
		opts.Network = "host"
	}
	if opts.RunID == "" {
		opts.RunID = "test-" + uuid.NewString()
	}
	if opts.Version == "" {
		opts.Version = "test"
	}
	p, err := docker.New(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		assert.Zero(t, countRun(t, cli, opts.RunID), "labelled containers left for run %s", opts.RunID)
		_ = p.Close()
	})
	return p
}

// countRun counts containers (running or not) labelled with run id.
func countRun(t *testing.T, cli *client.Client, run string) int {
	t.Helper()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRun+"="+run)),
	})
	require.NoError(t, err)
	return len(cs)
}

func acquire(t *testing.T, p *docker.Provider, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := p.Acquire(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
	return sb
}

type result struct {
	status         sandbox.ExitStatus
	err            error
	stdout, stderr string
}

// run executes cmd to the end, reading both streams concurrently.
func run(ctx context.Context, t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) result {
	t.Helper()
	p, err := sb.Exec(ctx, cmd)
	require.NoError(t, err)
	defer p.Close()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&out, p.Stdout()) })
	wg.Go(func() { _, _ = io.Copy(&errb, p.Stderr()) })
	st, err := p.Wait()
	wg.Wait()
	return result{st, err, out.String(), errb.String()}
}

func sh(script string) sandbox.Command {
	return sandbox.Command{Args: []string{"sh", "-c", script}}
}

func TestExecBasics(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"SPEC_VAR": "from-spec", "BOTH": "spec"}})
	ctx := context.Background()

	r := run(ctx, t, sb, sandbox.Command{
		Args: []string{"sh", "-c", `echo "out:$SPEC_VAR:$BOTH:$CMD_VAR:$HOME:$TZ:$(pwd)"; echo "err" >&2; exit 7`},
		Env:  map[string]string{"CMD_VAR": "from-cmd", "BOTH": "cmd"},
	})
	require.NoError(t, r.err)
	assert.Equal(t, 7, r.status.Code)
	assert.Equal(t, "out:from-spec:cmd:from-cmd:/home/agent:UTC:/workspace\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)

	// argv passes through untouched: no shell parsing of arguments.
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"printf", "%s|", "a b", "$HOME", "'q'", ";", ""}})
	require.NoError(t, r.err)
	assert.Equal(t, "a b|$HOME|'q'|;||", r.stdout)

	// Stdin is delivered and closed.
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"cat"}, Stdin: []byte("hello\nworld")})
	assert.Equal(t, "hello\nworld", r.stdout)

	// Dir: relative to the workspace.
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", "mkdir -p sub && cd sub && pwd"}})
	require.True(t, r.status.Success(), r.stderr)
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"pwd"}, Dir: "sub"})
	assert.Equal(t, "/workspace/sub\n", r.stdout)

	// A missing program is exit 127 with a message.
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"no-such-program"}})
	assert.Equal(t, 127, r.status.Code)
	assert.Contains(t, r.stderr, "no-such-program")

	// An invalid variable name is refused before launch.
	_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Env: map[string]string{"BAD-NAME": "x"}})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
}

func TestEnvValuesNeverInArgvOrConfig(t *testing.T) {
	cli := engine(t)
	p := newProvider(t, docker.Options{Client: cli})
	secret := "s3cr3t-" + uuid.NewString()
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"SPEC_SECRET": secret}})
	ctx := context.Background()
	r := run(ctx, t, sb, sandbox.Command{
		Args: []string{"sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f"; echo; done; echo "len:${#CMD_SECRET}:${#SPEC_SECRET}"`},
		Env:  map[string]string{"CMD_SECRET": secret},
	})
	require.NoError(t, r.err)
	assert.NotContains(t, r.stdout, secret)
	assert.Contains(t, r.stdout, "len:43:43")
	ins, err := cli.ContainerInspect(ctx, sb.ID())
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(ins.Config.Env, " "), secret)
	assert.NotContains(t, strings.Join(ins.Config.Cmd, " "), secret)
}

func TestHardening(t *testing.T) {
	cli := engine(t)
	p := newProvider(t, docker.Options{Client: cli})
	ws := t.TempDir()
	sb := acquire(t, p, sandbox.Spec{
		Workspace:   ws,
		User:        "1000:1000",
		CPUs:        1.5,
		MemoryBytes: 256 << 20,
		Pids:        200,
		Network:     "none",
		Labels:      map[string]string{"session": "sess-1", "example.com/extra": "x"},
	})
	require.NoError(t, os.Chmod(ws, 0o777))
	ctx := context.Background()
	r := run(ctx, t, sb, sh(`id -u; id -g; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; stat -c '%a %u %g' "$HOME";
		grep ' /home/agent ' /proc/mounts | cut -d' ' -f3; grep ' /workspace ' /proc/mounts | cut -d' ' -f3;
		ls /var/run/docker.sock 2>&1 || true; ps -o comm= -p 1; cat /proc/1/cmdline | tr '\0' ' '`))
	require.True(t, r.status.Success(), r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 9, r.stdout)
	assert.Equal(t, "1000", lines[0])
	assert.Equal(t, "1000", lines[1])
	assert.Contains(t, r.stdout, "CapEff:\t0000000000000000")
	assert.Contains(t, r.stdout, "CapPrm:\t0000000000000000")
	assert.Contains(t, r.stdout, "NoNewPrivs:\t1")
	assert.Contains(t, r.stdout, "700 1000 1000")
	assert.Contains(t, r.stdout, "tmpfs")
	assert.Contains(t, r.stdout, "No such file")
	assert.Contains(t, r.stdout, current().init)

	// The workspace is the host directory.
	r = run(ctx, t, sb, sh(`echo from-sandbox > /workspace/f`))
	require.True(t, r.status.Success(), r.stderr)
	b, err := os.ReadFile(filepath.Join(ws, "f"))
	require.NoError(t, err)
	assert.Equal(t, "from-sandbox\n", string(b))

	ins, err := cli.ContainerInspect(ctx, sb.ID())
	require.NoError(t, err)
	hc := ins.HostConfig
	if !current().podman {
		// Podman reports the capabilities it dropped by name; the
		// process's own sets above are what counts.
		assert.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	}
	assert.Contains(t, hc.SecurityOpt, "no-new-privileges")
	require.NotNil(t, hc.Init)
	assert.True(t, *hc.Init)
	assert.Equal(t, int64(1.5e9), hc.NanoCPUs)
	assert.Equal(t, int64(256<<20), hc.Memory)
	require.NotNil(t, hc.PidsLimit)
	assert.Equal(t, int64(200), *hc.PidsLimit)
	assert.Equal(t, "none", string(hc.NetworkMode))
	assert.False(t, hc.Privileged)
	for _, m := range ins.Mounts {
		assert.NotContains(t, m.Source, "docker.sock")
	}
	l := ins.Config.Labels
	assert.Equal(t, "true", l[docker.LabelManaged])
	assert.Equal(t, "test", l[docker.LabelVersion])
	assert.Equal(t, "sess-1", l[docker.LabelSession])
	assert.Equal(t, "x", l["example.com/extra"])
	assert.NotEmpty(t, l[docker.LabelRun])
	assert.Equal(t, os.Getpid(), atoi(t, l[docker.LabelOwnerPID]))
	assert.Equal(t, "1000:1000", ins.Config.User)
}

// TestDefaultLimits: a lease whose spec sets no limit gets the documented
// defaults, a read-only image and bounded tmpfs home and /tmp; the
// provider's options replace the defaults, and negative ones remove them.
func TestDefaultLimits(t *testing.T) {
	cli := engine(t)
	p := newProvider(t, docker.Options{Client: cli})
	sb := acquire(t, p, sandbox.Spec{})
	ctx := context.Background()
	r := run(ctx, t, sb, sh(`touch /outpost-root 2>/dev/null && echo ROOT-WRITABLE || echo root-read-only
		touch /usr/local/bin/x 2>/dev/null && echo USR-WRITABLE || echo usr-read-only
		touch /tmp/x "$HOME/x" /workspace/.x && echo tmp-home-workspace-writable
		df -B1 --output=size,target /tmp "$HOME" | tail -n 2`))
	require.True(t, r.status.Success(), r.stderr)
	assert.Contains(t, r.stdout, "root-read-only")
	assert.Contains(t, r.stdout, "usr-read-only")
	assert.Contains(t, r.stdout, "tmp-home-workspace-writable")
	assert.Regexp(t, `(?m)^\s*`+strconv.FormatInt(docker.DefaultTmpBytes, 10)+`\s+/tmp$`, r.stdout)
	assert.Regexp(t, `(?m)^\s*`+strconv.FormatInt(docker.DefaultHomeBytes, 10)+`\s+/home/agent$`, r.stdout)
	ins, err := cli.ContainerInspect(ctx, sb.ID())
	require.NoError(t, err)
	hc := ins.HostConfig
	assert.True(t, hc.ReadonlyRootfs)
	assert.Equal(t, int64(docker.DefaultCPUs*1e9), hc.NanoCPUs)
	assert.Equal(t, docker.DefaultMemoryBytes, hc.Memory)
	assert.Equal(t, docker.DefaultMemoryBytes, hc.MemorySwap, "no swap")
	require.NotNil(t, hc.PidsLimit)
	assert.Equal(t, docker.DefaultPids, *hc.PidsLimit)

	// Options replace the defaults; a spec value wins over both.
	p2 := newProvider(t, docker.Options{Client: cli, CPUs: 0.5, MemoryBytes: 512 << 20, Pids: -1, HomeBytes: 64 << 20})
	sb2 := acquire(t, p2, sandbox.Spec{Pids: 300})
	ins, err = cli.ContainerInspect(ctx, sb2.ID())
	require.NoError(t, err)
	assert.Equal(t, int64(5e8), ins.HostConfig.NanoCPUs)
	assert.Equal(t, int64(512<<20), ins.HostConfig.Memory)
	require.NotNil(t, ins.HostConfig.PidsLimit)
	assert.Equal(t, int64(300), *ins.HostConfig.PidsLimit)
	sb3 := acquire(t, p2, sandbox.Spec{})
	ins, err = cli.ContainerInspect(ctx, sb3.ID())
	require.NoError(t, err)
	assert.True(t, ins.HostConfig.PidsLimit == nil || *ins.HostConfig.PidsLimit <= 0, "negative: no pids limit")
	r = run(ctx, t, sb3, sh(`df -B1 --output=size "$HOME" | tail -n 1`))
	assert.Equal(t, strconv.Itoa(64<<20), strings.TrimSpace(r.stdout))
}

func TestDefaultUserIsNotRoot(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	r := run(context.Background(), t, sb, sh(`id -u; touch /workspace/x && echo writable`))
	require.True(t, r.status.Success(), r.stderr)
	assert.NotEqual(t, "0", strings.Split(r.stdout, "\n")[0])
	assert.Contains(t, r.stdout, "writable")
}

func TestReadOnlyMounts(t *testing.T) {
	p := newProvider(t, docker.Options{})
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "data"), []byte("ro-data"), 0o644))
	require.NoError(t, os.Chmod(src, 0o755))
	sb := acquire(t, p, sandbox.Spec{Mounts: []sandbox.Mount{{Source: src, Target: "/opt/data"}}})
	r := run(context.Background(), t, sb, sh(`cat /opt/data/data; echo; echo x > /opt/data/new 2>/dev/null && echo WROTE || echo refused`))
	assert.Equal(t, "ro-data\nrefused\n", r.stdout)

	_, err := p.Acquire(context.Background(), sandbox.Spec{Mounts: []sandbox.Mount{{Source: src, Target: "relative"}}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = p.Acquire(context.Background(), sandbox.Spec{Network: "container:abc"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = p.Acquire(context.Background(), sandbox.Spec{User: "root"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}

// groupScript starts a grandchild that ignores nothing, records its pid in
// the workspace and waits.
const groupScript = `sleep 300 & echo $! > /workspace/child.pid; echo started; wait`

// alive reports whether pid (read from the workspace file) still runs in sb.
func alive(t *testing.T, sb sandbox.Sandbox, pidFile string) bool {
	t.Helper()
	r := run(context.Background(), t, sb, sh(`kill -0 "$(cat `+pidFile+`)" 2>/dev/null && echo alive || echo dead`))
	return strings.TrimSpace(r.stdout) == "alive"
}

func waitStarted(t *testing.T, p sandbox.Process) {
	t.Helper()
	buf := make([]byte, len("started\n"))
	_, err := io.ReadFull(p.Stdout(), buf)
	require.NoError(t, err)
	require.Equal(t, "started\n", string(buf))
}

func TestSignalReachesGroup(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	pr, err := sb.Exec(context.Background(), sh(groupScript))
	require.NoError(t, err)
	defer pr.Close()
	waitStarted(t, pr)
	require.True(t, alive(t, sb, "/workspace/child.pid"))

	start := time.Now()
	require.NoError(t, pr.Signal(syscall.SIGTERM))
	st, err := pr.Wait()
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGTERM"}, st)
	assert.False(t, alive(t, sb, "/workspace/child.pid"), "grandchild survived SIGTERM to the group")
}

func TestCancelKillsGroup(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	// trap '' TERM: only KILL works.
	pr, err := sb.Exec(ctx, sh(`trap '' TERM; `+groupScript))
	require.NoError(t, err)
	defer pr.Close()
	waitStarted(t, pr)
	start := time.Now()
	cancel()
	st, err := pr.Wait()
	require.NoError(t, err, "a cancelled process has a status, not a wait error")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, "SIGKILL", st.Signal)
	assert.False(t, alive(t, sb, "/workspace/child.pid"))
}

func TestDeadlineKillsGroup(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	pr, err := sb.Exec(ctx, sh(groupScript))
	require.NoError(t, err)
	defer pr.Close()
	st, err := pr.Wait()
	require.NoError(t, err)
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.Equal(t, "SIGKILL", st.Signal)
	assert.False(t, alive(t, sb, "/workspace/child.pid"))
}

func TestWaitIgnoresGrandchildHoldingOutput(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	pr, err := sb.Exec(context.Background(), sh(`sleep 300 & echo $! > /workspace/child.pid; echo done`))
	require.NoError(t, err)
	start := time.Now()
	st, err := pr.Wait()
	require.NoError(t, err)
	assert.Equal(t, 0, st.Code)
	// The engine itself cuts a held stream 2 s after the exit; Wait must not
	// be waiting for that.
	assert.Less(t, time.Since(start), 1900*time.Millisecond, "Wait followed the pipes, not the process")
	require.NoError(t, pr.Close())
	require.NoError(t, pr.Close(), "Close is idempotent")
	assert.False(t, alive(t, sb, "/workspace/child.pid"), "Close left the group alive")
	// Wait again returns the same status.
	st2, err := pr.Wait()
	require.NoError(t, err)
	assert.Equal(t, st, st2)
}

func TestCloseUnblocksReaders(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	pr, err := sb.Exec(context.Background(), sh(`echo started; sleep 300`))
	require.NoError(t, err)
	waitStarted(t, pr)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(pr.Stdout())
		done <- err
	}()
	require.NoError(t, pr.Close())
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reader still blocked after Close")
	}
	st, err := pr.Wait()
	require.NoError(t, err)
	assert.Equal(t, "SIGKILL", st.Signal)
}

func TestKeepStdinOpen(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	pr, err := sb.Exec(context.Background(), sandbox.Command{
		Args:          []string{"sh", "-c", `while read -r l; do echo "got:$l"; done; echo eof`},
		Stdin:         []byte("first\n"),
		KeepStdinOpen: true,
	})
	require.NoError(t, err)
	defer pr.Close()
	require.NotNil(t, pr.Stdin())
	br := newLineReader(pr.Stdout())
	assert.Equal(t, "got:first", br())
	_, err = io.WriteString(pr.Stdin(), "second\n")
	require.NoError(t, err)
	assert.Equal(t, "got:second", br())
	require.NoError(t, pr.Stdin().Close())
	assert.Equal(t, "eof", br())
	st, err := pr.Wait()
	require.NoError(t, err)
	assert.True(t, st.Success())

	// Without KeepStdinOpen there is no live stdin.
	pr2, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
	require.NoError(t, err)
	defer pr2.Close()
	assert.Nil(t, pr2.Stdin())
}

func newLineReader(r io.Reader) func() string {
	var buf []byte
	one := make([]byte, 1)
	return func() string {
		buf = buf[:0]
		for {
			n, err := r.Read(one)
			if n == 1 {
				if one[0] == '\n' {
					return string(buf)
				}
				buf = append(buf, one[0])
			}
			if err != nil {
				return string(buf)
			}
		}
	}
}

func TestCopyInOut(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	ctx := context.Background()

	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	add := func(name string, mode int64, typ byte, body string) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Typeflag: typ, Size: int64(len(body)), Uid: 0, Gid: 0, ModTime: time.Unix(1700000000, 0)}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	add(".claude/", 0o700, tar.TypeDir, "")
	add(".claude/creds.json", 0o600, tar.TypeReg, `{"token":"x"}`)
	add(".claude/run.sh", 0o755, tar.TypeReg, "#!/bin/sh\necho ran\n")
	require.NoError(t, tw.Close())
	require.NoError(t, sb.CopyIn(ctx, sb.Home(), &in))

	// Visible inside (the tmpfs home), owned by the user, modes kept.
	r := run(ctx, t, sb, sh(`stat -c '%n %a %U' $HOME/.claude $HOME/.claude/creds.json $HOME/.claude/run.sh; $HOME/.claude/run.sh`))
	require.True(t, r.status.Success(), r.stderr)
	assert.Equal(t, "/home/agent/.claude 700 agent\n/home/agent/.claude/creds.json 600 agent\n/home/agent/.claude/run.sh 755 agent\nran\n", r.stdout)

	rc, err := sb.CopyOut(ctx, sb.Home()+"/.claude")
	require.NoError(t, err)
	got := map[string]int64{}
	bodies := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got[h.Name] = h.Mode & 0o7777
		b, _ := io.ReadAll(tr)
		bodies[h.Name] = string(b)
	}
	require.NoError(t, rc.Close())
	assert.Equal(t, map[string]int64{".claude/": 0o700, ".claude/creds.json": 0o600, ".claude/run.sh": 0o755}, got)
	assert.JSONEq(t, `{"token":"x"}`, bodies[".claude/creds.json"])

	// A single file is named by its base name.
	rc, err = sb.CopyOut(ctx, "/home/agent/.claude/creds.json")
	require.NoError(t, err)
	h, err := tar.NewReader(rc).Next()
	require.NoError(t, err)
	assert.Equal(t, "creds.json", h.Name)
	require.NoError(t, rc.Close())

	// Missing path.
	_, err = sb.CopyOut(ctx, "/home/agent/missing")
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// Unsafe destinations.
	for _, dir := range []string{"relative", "/home/agent/../etc", "", "/"} {
		err := sb.CopyIn(ctx, dir, bytes.NewReader(nil))
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "CopyIn(%q): %v", dir, err)
		_, err = sb.CopyOut(ctx, dir)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "CopyOut(%q): %v", dir, err)
	}

	// A traversal entry is refused by tar and the error surfaces.
	var evil bytes.Buffer
	tw = tar.NewWriter(&evil)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}))
	_, _ = tw.Write([]byte("x"))
	require.NoError(t, tw.Close())
	err = sb.CopyIn(ctx, "/home/agent/sub", &evil)
	require.Error(t, err)
	r = run(ctx, t, sb, sh(`ls /home/agent/escape 2>/dev/null && echo ESCAPED || echo contained`))
	assert.Equal(t, "contained\n", r.stdout)
}

func TestOOMKilled(t *testing.T) {
	p := newProvider(t, docker.Options{})
	sb := acquire(t, p, sandbox.Spec{MemoryBytes: 64 << 20})
	r := run(context.Background(), t, sb, sh(`head -c 300m /dev/zero | tail`))
	require.NoError(t, r.err)
	assert.True(t, r.status.OOMKilled, "status %v", r.status)
	assert.False(t, r.status.Success())
	assert.Equal(t, "SIGKILL", r.status.Signal)

	// The lease survives; a normal command is not flagged.
	r = run(context.Background(), t, sb, sh(`exit 1`))
	assert.Equal(t, sandbox.ExitStatus{Code: 1}, r.status)
}

// TestPidsLimitReached: a process refused a fork at the lease's pids limit
// says so after it ended — read from the lease's count of refused forks, or
// from the engine's stats while the leftovers still hold every slot — and a
// process that stayed under the limit does not, also after one that did.
func TestPidsLimitReached(t *testing.T) {
	p := newProvider(t, docker.Options{})
	ctx := context.Background()
	limits := func(sb sandbox.Sandbox, script string) []string {
		t.Helper()
		proc, err := sb.Exec(ctx, sh(script))
		require.NoError(t, err)
		defer proc.Close()
		go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
		go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
		_, err = proc.Wait()
		require.NoError(t, err)
		lr, ok := proc.(sandbox.LimitReporter)
		require.True(t, ok, "a Docker process reports its lease's limits")
		return lr.LimitsReached(ctx)
	}
	// 40 sleeps in a lease of 32 processes: the shell's fork is refused
	// and it exits; its EXIT trap (a builtin) kills what it started.
	const bomb = `i=0; while [ $i -lt 40 ]; do sleep 1000 & i=$((i+1)); done`
	sb := acquire(t, p, sandbox.Spec{Pids: 32})
	assert.Empty(t, limits(sb, `for i in 1 2 3; do sleep 0 & done; wait`), "under the limit")
	assert.Equal(t, []string{sandbox.LimitPids}, limits(sb, `trap 'kill -s KILL 0' EXIT; `+bomb))
	assert.Empty(t, limits(sb, `exit 1`), "a later failure in the same lease is not the limit's")

	// The sleeps outlive the shell and hold the lease near its limit.
	held := acquire(t, p, sandbox.Spec{Pids: 32})
	assert.Equal(t, []string{sandbox.LimitPids}, limits(held, bomb))
}

func TestEngineUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-docker.sock")
	start := time.Now()
	_, err := docker.New(context.Background(), docker.Options{Host: "unix://" + sock, PingTimeout: 2 * time.Second})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "is dockerd running?")
}

func TestMissingImage(t *testing.T) {
	p := newProvider(t, docker.Options{})
	_, err := p.Acquire(context.Background(), sandbox.Spec{Image: "outpost/does-not-exist:never"})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)
	assert.Contains(t, err.Error(), "not found")
}

func TestReleaseIdempotentAndCancelled(t *testing.T) {
	cli := engine(t)
	p := newProvider(t, docker.Options{Client: cli})
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	ws := workspaceOf(t, cli, sb.ID())
	require.DirExists(t, ws)

	// A running process does not block removal.
	pr, err := sb.Exec(context.Background(), sh(`echo started; sleep 300`))
	require.NoError(t, err)
	waitStarted(t, pr)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // cleanup must survive a cancelled context
	require.NoError(t, sb.Release(ctx))
	require.NoError(t, sb.Release(ctx))
	require.NoError(t, sb.Release(context.Background()))
	assert.NoDirExists(t, ws, "temporary workspace not removed")
	require.NoError(t, p.AwaitRemovals(context.Background()))
	_, err = cli.ContainerInspect(context.Background(), sb.ID())
	assert.True(t, cerrdefs.IsNotFound(err), "container still there: %v", err)

	st, err := pr.Wait()
	require.NoError(t, err, "a process killed by Release has a status")
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, st)
	assert.NoError(t, pr.Close())

	// Exec on a released lease is a sandbox error.
	_, err = sb.Exec(context.Background(), sh("true"))
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)

	// Removal by someone else first is fine too.
	sb2, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	require.NoError(t, cli.ContainerRemove(context.Background(), sb2.ID(), container.RemoveOptions{Force: true}))
	require.NoError(t, sb2.Release(context.Background()))
}

func workspaceOf(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	ins, err := cli.ContainerInspect(context.Background(), id)
	require.NoError(t, err)
	for _, m := range ins.Mounts {
		if m.Destination == docker.Root {
			return m.Source
		}
	}
	t.Fatalf("no workspace mount on %s", id)
	return ""
}

func TestReleaseAllAndCleanupOnSignal(t *testing.T) {
	cli := engine(t)
	runID := "test-" + uuid.NewString()
	p := newProvider(t, docker.Options{Client: cli, RunID: runID})
	for range 3 {
		_, err := p.Acquire(context.Background(), sandbox.Spec{})
		require.NoError(t, err)
	}
	assert.Len(t, p.Live(), 3)
	assert.Equal(t, 3, countRun(t, cli, runID))

	done := make(chan error, 1)
	stop := sandbox.CleanupOnSignal(p.ReleaseAll, 20*time.Second, func(err error) { done <- err }, syscall.SIGUSR1)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("cleanup did not run")
	}
	assert.Empty(t, p.Live())
	assert.Zero(t, countRun(t, cli, runID))
}

func TestReaper(t *testing.T) {
	cli := engine(t)
	ctx := context.Background()
	runID := "test-reap-" + uuid.NewString()
	host, err := os.Hostname()
	require.NoError(t, err)

	// A pid that surely belongs to no process any more.
	c := exec.Command("true")
	require.NoError(t, c.Run())
	deadPID := c.Process.Pid

	mk := func(owner string) string {
		resp, err := cli.ContainerCreate(ctx, &container.Config{
			Image:      docker.DefaultImage,
			Entrypoint: []string{"sleep"},
			Cmd:        []string{"infinity"},
			Labels: map[string]string{
				docker.LabelManaged:   "true",
				docker.LabelRun:       runID,
				docker.LabelOwnerPID:  owner,
				docker.LabelOwnerHost: host,
			},
		}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
		return resp.ID
	}
	dead := mk(itoa(deadPID))
	live := mk(itoa(os.Getpid()))
	// Owned by another host: only the grace period decides.
	foreign, err := cli.ContainerCreate(ctx, &container.Config{
		Image: docker.DefaultImage, Entrypoint: []string{"true"},
		Labels: map[string]string{docker.LabelManaged: "true", docker.LabelRun: runID, docker.LabelOwnerPID: "1", docker.LabelOwnerHost: "elsewhere"},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), foreign.ID, container.RemoveOptions{Force: true})
	})

	ids := func(ls []docker.Leftover) []string {
		var out []string
		for _, l := range ls {
			if l.Labels[docker.LabelRun] == runID {
				out = append(out, l.ID)
			}
		}
		return out
	}

	// Dry run: reported, not removed.
	got, err := docker.Reap(ctx, cli, docker.ReapOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, []string{dead}, ids(got))
	assert.Equal(t, 3, countRun(t, cli, runID))

	got, err = docker.Reap(ctx, cli, docker.ReapOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{dead}, ids(got))
	for _, l := range got {
		if l.ID == dead {
			assert.True(t, l.Removed)
			assert.Contains(t, l.Reason, "gone")
		}
	}
	_, err = cli.ContainerInspect(ctx, dead)
	assert.True(t, cerrdefs.IsNotFound(err))
	_, err = cli.ContainerInspect(ctx, live)
	assert.NoError(t, err, "a live owner's container was reaped")

	// With a clock far in the future the foreign one is past its grace.
	got, err = docker.Reap(ctx, cli, docker.ReapOptions{Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	require.NoError(t, err)
	assert.Equal(t, []string{foreign.ID}, ids(got))
	assert.Equal(t, 1, countRun(t, cli, runID))
}

func TestSequentialCyclesLeaveNothing(t *testing.T) {
	testenv.Short(t)
	cli := engine(t)
	runID := "test-cycles-" + uuid.NewString()
	p := newProvider(t, docker.Options{Client: cli, RunID: runID})
	ctx := context.Background()
	n := 50
	start := time.Now()
	for i := range n {
		sb, err := p.Acquire(ctx, sandbox.Spec{})
		require.NoError(t, err)
		r := run(ctx, t, sb, sandbox.Command{Args: []string{"echo", itoa(i)}})
		require.True(t, r.status.Success(), r.stderr)
		require.Equal(t, itoa(i)+"\n", r.stdout)
		require.NoError(t, sb.Release(ctx))
	}
	t.Logf("%d cold cycles in %v (%v each)", n, time.Since(start), time.Since(start)/time.Duration(n))
	require.NoError(t, p.AwaitRemovals(ctx))
	assert.Zero(t, p.Removing())
	assert.Zero(t, countRun(t, cli, runID))
	assert.Empty(t, p.Live())
}

func TestBuildImage(t *testing.T) {
	cli := engine(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+docker.DefaultImage+"\nCOPY hello.txt /tmp/hello.txt\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte(".env\n"), 0o644))
	tag := "outpost/test-build:" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	var out bytes.Buffer
	require.NoError(t, docker.BuildImage(context.Background(), cli, dir, "Dockerfile", tag, &out))
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, imageRemoveOptions()) })
	assert.Contains(t, out.String(), "Successfully tagged")
	_, err := cli.ImageInspect(context.Background(), tag)
	require.NoError(t, err)

	// A COPY of an ignored file fails: it was never sent.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+docker.DefaultImage+"\nCOPY .env /tmp/\n"), 0o644))
	err = docker.BuildImage(context.Background(), cli, dir, "Dockerfile", tag+"x", nil)
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)
}

func itoa(i int) string { return strconv.Itoa(i) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	i, err := strconv.Atoi(s)
	require.NoError(t, err)
	return i
}

func imageRemoveOptions() image.RemoveOptions {
	return image.RemoveOptions{Force: true, PruneChildren: true}
}

func TestParallelLeases(t *testing.T) {
	cli := engine(t)
	runID := "test-par-" + uuid.NewString()
	p := newProvider(t, docker.Options{Client: cli, RunID: runID})
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx := context.Background()
			sb, err := p.Acquire(ctx, sandbox.Spec{})
			if err != nil {
				errs <- err
				return
			}
			defer func() { errs <- sb.Release(ctx) }()
			pr, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", itoa(i)}})
			if err != nil {
				errs <- err
				return
			}
			out, _ := io.ReadAll(pr.Stdout())
			st, err := pr.Wait()
			_ = pr.Close()
			if err == nil && (!st.Success() || string(out) != itoa(i)+"\n") {
				err = errors.New("bad result " + st.String() + " " + string(out))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, p.AwaitRemovals(context.Background()))
	assert.Zero(t, countRun(t, cli, runID))
}

func TestAcquireCancelled(t *testing.T) {
	cli := engine(t)
	runID := "test-cancel-" + uuid.NewString()
	p := newProvider(t, docker.Options{Client: cli, RunID: runID})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Acquire(ctx, sandbox.Spec{})
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
	assert.Zero(t, countRun(t, cli, runID))
	assert.Empty(t, p.Live())
}
