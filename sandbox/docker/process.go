package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// wrapperScript starts every command: sh -c wrapperScript outpost-exec PIDBASE ARGV...
// It records its pid, honours a cancellation that arrived before it ran (by
// killing itself, so the status reads as the SIGKILL it stands for),
// makes sure it leads its own process group (setsid does not fork when the
// caller is not already a group leader) and execs the argv, which keeps the
// pid. The argv stays a list of positional parameters: nothing is parsed.
const wrapperScript = `p=$1; shift
echo $$ >"$p.pid" || exit 126
if [ -e "$p.cancel" ]; then kill -KILL $$; fi
g=
read -r _ _ _ _ g _ 2>/dev/null </proc/$$/stat || g=$$
if [ "$g" != "$$" ]; then exec setsid "$@"; fi
exec "$@"`

// signalScript signals a wrapped command's group:
// sh -c signalScript outpost-signal PIDBASE SIGNAME MARK CLEAN.
// MARK=1 leaves a cancellation marker first, so a command whose wrapper has
// not written its pid yet kills itself instead of starting (the wrapper writes
// its pid before it looks for the marker, so one of the two always sees the
// other). CLEAN=1 removes the pid file afterwards.
const signalScript = `p=$1 s=$2
if [ "$3" = 1 ]; then : >"$p.cancel"; fi
if [ -s "$p.pid" ]; then read -r g <"$p.pid" && kill -s "$s" -- "-$g" 2>/dev/null; fi
if [ "$4" = 1 ]; then rm -f -- "$p.pid"; fi
exit 0`

// Poll bounds for Wait. While the attach stream is open the exec is
// inspected first after firstPoll, then at doubling intervals up to
// maxPoll: the stream's end is what normally reports the exit (it triggers
// an inspect at once), and polling only catches a grandchild that holds the
// output open, so it need not be quick. Inspecting every few milliseconds
// instead cost the engine a call per exec every few milliseconds, which
// showed with many leases at once. After the stream ended, the exit is
// expected within moments: inspects start over at minPoll.
const (
	minPoll   = 10 * time.Millisecond
	firstPoll = 250 * time.Millisecond
	maxPoll   = time.Second
)

// execSpec is one exec inside a lease.
type execSpec struct {
	args      []string
	env       map[string]string
	dir       string
	stdin     io.Reader // nil: stdin not attached
	keepStdin bool
}

// process is a running exec; it implements [sandbox.Process] with the
// shared [leasekit.Proc].
type process struct {
	*leasekit.Proc
	l       *lease
	execID  string
	conn    types.HijackedResponse
	started time.Time

	streamDone chan struct{} // closed when the attach stream ended

	mu      sync.Mutex
	natural bool // the stream ended with EOF, not by our Close or an error
	// streamFirst: the stream had ended when the exit was observed. A stream
	// that ends only after the exit was held open by something else in the
	// group (the engine then cuts it about two seconds later).
	streamFirst bool
	streamErr   error
}

var _ sandbox.Process = (*process)(nil)

// Exec implements [sandbox.Sandbox]. A relative Command.Dir is taken
// relative to [Root]. Spec.Env and Command.Env (which wins) go into the
// exec's environment only.
func (l *lease) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return leasekit.Exec(cmd, func() (leasekit.Process, error) {
		env := copyEnv(l.env)
		for k, v := range cmd.Env {
			env[k] = v
		}
		if l.keeperCanRun(ctx, cmd) {
			rp, err := l.keeperRun(ctx, cmd, env)
			if err != nil {
				return nil, err
			}
			return rp, nil
		}
		es := execSpec{args: cmd.Args, env: env, dir: cmd.Dir, keepStdin: cmd.KeepStdinOpen}
		if len(cmd.Stdin) > 0 || cmd.KeepStdinOpen {
			es.stdin = bytes.NewReader(cmd.Stdin)
		}
		p, err := l.start(ctx, es)
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}

// start creates, attaches and starts an exec of es.
func (l *lease) start(ctx context.Context, es execSpec) (*process, error) {
	if l.rel.Released() {
		return nil, outposterr.New(outposterr.Sandbox, "exec %s: lease %s was released", es.args[0], shortID(l.id))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", es.args[0], err)
	}
	dir := leasekit.WorkDir(Root, es.dir)
	env := make([]string, 0, len(es.env))
	for k, v := range es.env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	pidBase := "/tmp/outpost-" + uuid.NewString()
	argv := append([]string{"sh", "-c", wrapperScript, "outpost-exec", pidBase}, es.args...)

	cli := l.p.cli
	cctx, cancel := l.p.opCtx(ctx)
	created, err := cli.ContainerExecCreate(cctx, l.id, container.ExecOptions{
		User:         l.user,
		AttachStdin:  es.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   dir,
		Cmd:          argv,
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exec %s: %w", es.args[0], ctx.Err())
		}
		return nil, engineError(err, "create exec in %s", shortID(l.id))
	}
	// The attach request starts the exec; its stream lives as long as the
	// turn, so it takes the caller's context (the dial is bounded by it).
	conn, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exec %s: %w", es.args[0], ctx.Err())
		}
		return nil, engineError(err, "start exec in %s", shortID(l.id))
	}
	p := &process{
		l:          l,
		execID:     created.ID,
		conn:       conn,
		started:    time.Now(),
		streamDone: make(chan struct{}),
	}
	p.Proc = leasekit.NewProc(pidBase, signalScript, l.sendSignal)
	go p.copyOutput()
	if es.stdin != nil {
		ready := make(chan struct{})
		go p.writeStdin(es.stdin, !es.keepStdin, ready)
		if es.keepStdin {
			p.SetStdin(&stdinWriter{p: p, ready: ready})
		}
	}
	go p.watch(ctx)
	return p, nil
}

// copyOutput demultiplexes the attach stream into the stdout/stderr pipes.
func (p *process) copyOutput() {
	_, err := stdcopy.StdCopy(p.Out(), p.Err(), p.conn.Reader)
	p.Out().CloseWrite()
	p.Err().CloseWrite()
	p.mu.Lock()
	p.natural = err == nil
	p.streamErr = err
	p.mu.Unlock()
	close(p.streamDone)
}

// writeStdin sends the initial input, then closes stdin unless it stays open.
func (p *process) writeStdin(r io.Reader, closeAfter bool, ready chan struct{}) {
	defer close(ready)
	if _, err := io.Copy(p.conn.Conn, r); err != nil {
		p.l.p.log.Debug("write stdin", "exec", shortID(p.execID), "err", err)
	}
	if closeAfter {
		if err := p.conn.CloseWrite(); err != nil {
			p.l.p.log.Debug("close stdin", "exec", shortID(p.execID), "err", err)
		}
	}
}

// watch observes the exit of the exec's own process. It inspects the exec
// as soon as the attach stream ends and otherwise polls with a backoff
// (firstPoll doubling to maxPoll), so neither a grandchild holding the output
// open nor a caller that stops reading delays Wait. A done context kills the
// process group.
func (p *process) watch(ctx context.Context) {
	defer p.Finish()
	delay := firstPoll
	timer := time.NewTimer(delay)
	defer timer.Stop()
	streamDone, ctxDone, closing := p.streamDone, ctx.Done(), p.Closing()
	var giveUp <-chan time.Time
	streamEnded := false
	sawPid := false // Podman: the exec was seen running
	failures := 0
	for {
		select {
		case <-streamDone:
			// Inspect now; the daemon may record the exit just after the
			// stream ends, so start the backoff over.
			streamDone, streamEnded = nil, true
			delay = minPoll
		case <-timer.C:
		case <-ctxDone:
			ctxDone = nil
			if err := p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, false); err != nil {
				p.l.p.log.Debug("kill on cancel", "exec", shortID(p.execID), "err", err)
			}
			giveUp = time.After(p.l.p.opts.OpTimeout)
			delay = minPoll
		case <-closing:
			closing = nil
			if giveUp == nil {
				giveUp = time.After(p.l.p.opts.OpTimeout)
			}
			delay = minPoll
		case <-giveUp:
			p.SetExit(sandbox.ExitStatus{Code: -1}, outposterr.New(outposterr.Sandbox, "exec %s did not report its exit within %s", shortID(p.execID), p.l.p.opts.OpTimeout))
			return
		}
		ictx, cancel := p.l.p.opCtx(context.WithoutCancel(ctx))
		ins, err := p.l.p.cli.ContainerExecInspect(ictx, p.execID)
		cancel()
		switch {
		case err != nil && cerrdefs.IsNotFound(err):
			// The container is gone: removed by Release (the process was
			// killed with it) or by someone else (an error).
			var werr error
			if !p.l.rel.Releasing() {
				werr = outposterr.Wrap(outposterr.Sandbox, err, "exec %s vanished: container %s removed", shortID(p.execID), shortID(p.l.id))
			}
			p.SetExit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, werr)
			return
		case err != nil:
			failures++
			if failures >= 5 {
				p.SetExit(sandbox.ExitStatus{Code: -1}, engineError(err, "inspect exec %s", shortID(p.execID)))
				return
			}
		case p.l.p.flavor == flavorPodman:
			failures = 0
			if ins.Running || ins.Pid != 0 {
				sawPid = true
				break
			}
			if st := p.podmanState(ctx, sawPid, streamEnded, ins.ExitCode); st != execRunning {
				p.mu.Lock()
				p.streamFirst = streamEnded
				p.mu.Unlock()
				p.finish(ctx, ins.ExitCode, st == execNeverStarted)
				return
			}
		case !ins.Running && (ins.Pid != 0 || streamEnded):
			// Pid 0 with a finished stream: the exec never started (bad dir...).
			p.mu.Lock()
			p.streamFirst = streamEnded
			p.mu.Unlock()
			p.finish(ctx, ins.ExitCode, ins.Pid == 0)
			return
		default:
			failures = 0
		}
		timer.Reset(delay)
		delay = min(delay*2, maxPoll)
	}
}

// Exec states as Podman's inspect leaves them undecided.
const (
	execRunning = iota
	execExited
	execNeverStarted
)

// podmanState decides what a Podman exec that is not running (Running
// false, Pid 0) is. Podman resets Pid to 0 when the process exits, and an
// exec created but not started yet looks exactly like one that exited 0 —
// which it is, briefly, after the attach request returned (Podman answers
// the upgrade before it records the start). So: seen running, or its
// stream ended, means exited; otherwise the wrapper's pid file decides (the
// wrapper writes it before anything else): no file, not started yet; a file
// whose process is gone, exited. A 126/127 exit whose wrapper never wrote
// its pid file is an exec that never started (bad working directory).
func (p *process) podmanState(ctx context.Context, sawPid, streamEnded bool, code int) int {
	ambiguous := code == 126 || code == 127 // a runtime failure or the command's own
	switch {
	case code != 0 && !ambiguous:
		return execExited // a created exec reports 0
	case code == 0 && (sawPid || streamEnded):
		return execExited
	case ambiguous && sawPid:
		return execExited
	}
	out, err := p.l.quick(context.WithoutCancel(ctx), []string{"sh", "-c", probeScript, "outpost-probe", p.PIDBase()})
	switch {
	case err != nil:
		// The container is going away: nothing runs any more.
		return execExited
	case bytes.HasPrefix(out, []byte("none")) && ambiguous:
		return execNeverStarted
	case bytes.HasPrefix(out, []byte("none")), bytes.HasPrefix(out, []byte("alive")):
		return execRunning
	}
	return execExited
}

// probeScript tells whether a wrapped command started and whether it still
// runs: sh -c probeScript outpost-probe PIDBASE prints "none" (no pid file
// yet), "alive" or "gone".
const probeScript = `if [ ! -s "$1.pid" ]; then echo none; exit 0; fi
read -r g <"$1.pid" || { echo none; exit 0; }
if kill -0 "$g" 2>/dev/null; then echo alive; else echo gone; fi`

// finish records the exit status of code.
//
// The engine reports a process killed by signal n as exit code 128+n, the
// encoding shells use too; codes 129..159 are therefore reported as death by
// that signal (Code -1, Signal set). A program that itself exits with such a
// code is reported the same way.
func (p *process) finish(ctx context.Context, code int, neverStarted bool) {
	st := sandbox.ExitStatus{Code: code}
	if neverStarted {
		p.mu.Lock()
		serr := p.streamErr
		p.mu.Unlock()
		var werr error = outposterr.New(outposterr.Sandbox, "exec did not start in %s (exit %d)", shortID(p.l.id), code)
		if serr != nil {
			werr = outposterr.Wrap(outposterr.Sandbox, serr, "exec did not start in %s (exit %d)", shortID(p.l.id), code)
		}
		p.SetExit(st, werr)
		return
	}
	if code != 0 {
		// A SIGKILL Outpost did not send is most likely the OOM killer: ask
		// about the trailing event twice.
		likely := code == 128+9 && !p.Killed() && !p.l.rel.Releasing()
		st.OOMKilled = p.l.oomSince(context.WithoutCancel(ctx), p.execID, p.started, likely)
	}
	if dec := leasekit.StatusOf(code); dec.Signal != "" {
		st.Code, st.Signal = dec.Code, dec.Signal
	}
	p.SetExit(st, nil)
}

// sendSignal runs the signal script's argv. Not-found and conflict
// (container gone or stopped) mean there is nothing left to signal.
func (l *lease) sendSignal(ctx context.Context, argv []string) error {
	_, err := l.quick(ctx, argv)
	if err != nil && (cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err)) {
		return nil
	}
	if err != nil {
		return engineError(err, "signal SIG%s in %s", argv[5], shortID(l.id))
	}
	return nil
}

// Close implements [sandbox.Process]. It kills what is left of the process
// group, except when the output had already ended by itself when the exit
// was observed: then nothing of the group held the output and the extra
// exec is skipped (a daemonised grandchild that closed its output survives
// until Release; on Podman the group is always killed, see below).
// Leftovers matter beyond cleanliness: while one holds an
// exec's output the engine delays the exit of later execs by about two
// seconds.
func (p *process) Close() error {
	return p.CloseWith(func() bool {
		exited := leasekit.IsClosed(p.Done())
		p.mu.Lock()
		defer p.mu.Unlock()
		// Podman ends the attach stream when the exec's own process exits,
		// even while a grandchild holds the output, so its streams say
		// nothing about leftovers: the group is always killed there.
		return !(exited && p.natural && p.streamFirst && p.l.p.flavor != flavorPodman)
	}, p.conn.Close)
}

// stdinWriter is the live stdin of a process started with KeepStdinOpen.
type stdinWriter struct {
	p     *process
	ready chan struct{} // closed after Command.Stdin was written
	once  sync.Once
}

// Write sends b to the process after the initial Command.Stdin.
func (w *stdinWriter) Write(b []byte) (int, error) {
	<-w.ready
	return w.p.conn.Conn.Write(b)
}

// Close closes the process's stdin.
func (w *stdinWriter) Close() error {
	<-w.ready
	var err error
	w.once.Do(func() { err = w.p.conn.CloseWrite() })
	return err
}

// quick runs a short command as the lease user under the op timeout and
// returns its stdout; a non-zero exit is an error carrying its stderr.
func (l *lease) quick(ctx context.Context, argv []string) ([]byte, error) {
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	cli := l.p.cli
	created, err := cli.ContainerExecCreate(ctx, l.id, container.ExecOptions{
		User:         l.user,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   "/",
		Cmd:          argv,
	})
	if err != nil {
		return nil, err
	}
	conn, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Closing bounds the read on every transport (an ssh connection
	// helper's connection ignores deadlines).
	stop := context.AfterFunc(ctx, conn.Close)
	defer stop()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, conn.Reader); err != nil {
		return nil, fmt.Errorf("read %s output: %w", argv[0], err)
	}
	// The stream ends when the command exits; its status may lag a little.
	for delay := time.Millisecond; ; delay = min(delay*2, 100*time.Millisecond) {
		ins, err := cli.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			return nil, err
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return stdout.Bytes(), fmt.Errorf("%s exited %d: %s", argv[0], ins.ExitCode, bytes.TrimSpace(stderr.Bytes()))
			}
			return stdout.Bytes(), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// oomSince reports whether the engine recorded an out-of-memory kill in the
// container during the exec started at t: an "oom" event after this exec's
// own "exec_start" event (cgroup v1 engines set State.OOMKilled only when the
// container itself dies). Ordering by the engine's own events makes the
// answer independent of clock skew between this host and the engine. The
// event can trail the exit slightly, so a likely candidate (SIGKILL) is asked
// about twice.
func (l *lease) oomSince(ctx context.Context, execID string, t time.Time, likely bool) bool {
	if l.p.flavor == flavorPodman {
		return l.oomCounterRose(ctx)
	}
	tries := 1
	if likely {
		tries = 2
	}
	for i := range tries {
		if i > 0 {
			time.Sleep(250 * time.Millisecond)
		}
		if l.oomEvent(ctx, execID, t) {
			return true
		}
	}
	ictx, cancel := l.p.opCtx(ctx)
	defer cancel()
	if ins, err := l.p.cli.ContainerInspect(ictx, l.id); err == nil && ins.State != nil && ins.State.OOMKilled {
		return true
	}
	return false
}

// readCounter reads one cgroup counter of the container (leasekit's); -1
// when no file of it is readable.
func (l *lease) readCounter(ctx context.Context, counter []string) (int64, error) {
	return leasekit.ReadCounter(ctx, l.quick, counter)
}

// oomCounterRose is Podman's answer to "was that an OOM kill": Podman emits
// no event when the kernel kills an exec'd process, so the lease reads its
// memory cgroup's oom_kill counter and compares it with the last value it
// saw (a fresh container's is 0). Concurrent execs of one lease can take
// each other's kill; the agent's turn is the one that matters.
func (l *lease) oomCounterRose(ctx context.Context) bool {
	n, err := l.readCounter(ctx, leasekit.OOMCounter)
	if err != nil || n < 0 {
		l.p.log.Debug("oom counter", "container", shortID(l.id), "count", n, "err", err)
		return false
	}
	l.oomMu.Lock()
	defer l.oomMu.Unlock()
	if n > l.oomSeen {
		l.oomSeen = n
		return true
	}
	return false
}

var _ sandbox.LimitReporter = (*process)(nil)

// LimitsReached implements [sandbox.LimitReporter]: [sandbox.LimitPids] when
// the lease refused a fork at its pids limit since it last answered.
func (p *process) LimitsReached(ctx context.Context) []string {
	if p.l.pidsLimitReached(ctx) {
		return []string{sandbox.LimitPids}
	}
	return nil
}

// pidsReadTries bounds the attempts to read the refused-fork count.
const pidsReadTries = 5

// pidsLimitReached reports whether the pids cgroup's count of refused forks
// rose since the lease last looked (a fresh container's is 0). When not even
// that reading can start — the lease is still at its limit, as a fork bomb
// leaves it — the engine's stats tell instead.
func (l *lease) pidsLimitReached(ctx context.Context) bool {
	var n int64 = -1
	var err error
	// Near its limit the runtime may fail to start the reading ("read
	// init-p: connection reset by peer": its init's threads count against
	// the limit); a few more tries get through once a slot frees.
	for try, wait := 0, 50*time.Millisecond; try < pidsReadTries; try, wait = try+1, wait*2 {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if n, err = l.readCounter(ctx, leasekit.PidsCounter); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil || n < 0 {
		l.p.log.Debug("pids counter", "container", shortID(l.id), "count", n, "err", err)
		at := l.atPidsLimit(ctx)
		l.oomMu.Lock()
		l.pidsStale = l.pidsStale || at
		l.oomMu.Unlock()
		return at
	}
	l.oomMu.Lock()
	defer l.oomMu.Unlock()
	rose := n > l.pidsSeen && !l.pidsStale
	l.pidsSeen, l.pidsStale = max(n, l.pidsSeen), false
	return rose
}

// atPidsLimit reports whether the engine's stats show the container's
// processes at its pids limit now.
func (l *lease) atPidsLimit(ctx context.Context) bool {
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	st, err := l.p.cli.ContainerStatsOneShot(ctx, l.id)
	if err != nil {
		l.p.log.Debug("pids stats", "container", shortID(l.id), "err", err)
		return false
	}
	defer st.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(st.Body, 1<<20)).Decode(&s); err != nil {
		return false
	}
	return s.PidsStats.Limit > 0 && s.PidsStats.Current >= s.PidsStats.Limit
}

func (l *lease) oomEvent(ctx context.Context, execID string, t time.Time) bool {
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	// Look back a little further than t to allow for clock skew; the
	// exec_start event then tells where this exec began.
	msgs, errs := l.p.cli.Events(ctx, events.ListOptions{
		Since: timestamp(t.Add(-10 * time.Second)),
		Until: timestamp(time.Now()),
		Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("container", l.id),
			filters.Arg("event", string(events.ActionOOM)),
			filters.Arg("event", string(events.ActionExecStart)),
		),
	})
	// No exec id: the command began with the container (the keeper ran it).
	started := execID == ""
	var ooms []int64
	for {
		select {
		case m := <-msgs:
			switch {
			case strings.HasPrefix(string(m.Action), string(events.ActionExecStart)) && m.Actor.Attributes["execID"] == execID:
				started = true
			case m.Action == events.ActionOOM && started:
				return true
			case m.Action == events.ActionOOM:
				ooms = append(ooms, m.TimeNano)
			}
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				l.p.log.Debug("oom events", "container", shortID(l.id), "err", err)
			}
			if !started {
				// This exec's start fell out of the engine's event buffer:
				// fall back to this host's clock.
				for _, n := range ooms {
					if n >= t.UnixNano() {
						return true
					}
				}
			}
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func timestamp(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10) + "." + fmt.Sprintf("%09d", t.Nanosecond())
}
