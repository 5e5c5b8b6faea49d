package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/outpost-dev/outpost/internal/shquote"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// wrapperScript starts every command:
//
//	sh -c wrapperScript outpost-exec PIDBASE DIR WATCH ARGV...
//
// Its standard input begins with a header: a line with the exit marker's
// nonce, then one line per Command.Env variable (an export statement with
// the value single-quoted, newlines spelled "$nl"), then an empty line;
// what follows is the command's own input. So no value is ever in an argv
// or in the pod spec. The wrapper waits for the pod's home to exist (the
// main process creates it right after the container starts), enters DIR,
// starts the command in a new session (its own process group; env resets
// the SIGINT/SIGQUIT that sh ignores for background jobs, when env can),
// records its pid, honours a cancellation that arrived before the pid was
// written, writes a start marker "\x1eoutpost:NONCE:start\x1e" on stderr,
// waits for the command and writes an exit marker
// "\x1eoutpost:NONCE:exit:STATUS:OOMKILLS:CHANGED\x1e". The provider strips
// both from the stream. Exec returns at the start marker, Wait at the exit
// marker: a grandchild that keeps the output open does not hold it.
// OOMKILLS is how many processes the kernel's OOM killer ended in the
// container's cgroup while the command ran. With WATCH=1 (a lease with a
// host workspace), CHANGED is 1 when something under Root changed since the
// last workspace sync, so commands that change nothing cost no sync.
const wrapperScript = `b=$1 d=$2 w=$3; shift 3
nl='
'
IFS= read -r n || exit 125
while IFS= read -r l && [ -n "$l" ]; do eval "$l" || exit 125; done
oomc() { o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
if [ -r "$f" ]; then while read -r k v; do if [ "$k" = oom_kill ]; then o=$v; fi; done <"$f"; break; fi; done; }
i=0; while [ ! -d ` + Home + ` ] && [ $i -lt 100 ]; do sleep 0.02; i=$((i+1)); done
cd -- "$d" || exit 126
oomc; o1=$o
if [ -e /tmp/.outpost-envds ]; then case $1 in *=*) ;; *) set -- env --default-signal=INT,QUIT -- "$@";; esac; fi
exec 3<&0
setsid "$@" <&3 3<&- &
c=$!
exec 3<&-
echo "$c" >"$b.pid" || { kill -KILL "$c"; exit 126; }
if [ -e "$b.cancel" ]; then kill -KILL -- "-$c" 2>/dev/null || kill -KILL "$c" 2>/dev/null; fi
printf '\036outpost:%s:start\036' "$n" >&2
wait "$c"; s=$?
oomc
ch=0
if [ "$w" = 1 ]; then if [ ! -e ` + syncStamp + `.stamp ] || [ -n "$(find ` + Root + ` -cnewer ` + syncStamp + `.stamp -print -quit 2>/dev/null)" ]; then ch=1; fi; fi
printf '\036outpost:%s:exit:%s:%s:%s\036' "$n" "$s" "$((o - o1))" "$ch" >&2
exit "$s"`

// signalScript signals a wrapped command's group:
// sh -c signalScript outpost-signal PIDBASE SIGNAME MARK CLEAN.
// MARK=1 leaves a cancellation marker first, so a command whose wrapper has
// not written its pid yet is killed right after it starts (the wrapper
// writes its pid before it looks for the marker, so one of the two always
// sees the other). CLEAN=1 removes the pid file afterwards.
const signalScript = `p=$1 s=$2
if [ "$3" = 1 ]; then : >"$p.cancel"; fi
if [ -s "$p.pid" ]; then read -r g <"$p.pid" && kill -s "$s" -- "-$g" 2>/dev/null; fi
if [ "$4" = 1 ]; then rm -f -- "$p.pid" "$p.cancel"; fi
exit 0`

// execSpec is one exec inside a lease.
type execSpec struct {
	args      []string
	env       map[string]string
	dir       string
	stdin     []byte
	live      bool // keep stdin open for Process.Stdin
	stream    io.Reader
	syncAfter bool // sync the workspace back when the process ends
}

// process is a running exec; it implements [sandbox.Process] with the
// shared [leasekit.Proc].
type process struct {
	*leasekit.Proc
	l *lease

	filter    *leasekit.Markers
	stdinPipe *io.PipeWriter // nil unless live

	cancelStream context.CancelFunc
	streamDone   chan struct{} // closed when the exec stream ended
	started      chan struct{} // closed when the start marker arrived
	exited       chan struct{} // closed when the exit marker arrived

	mu        sync.Mutex
	streamErr error
	marker    exitMarker
}

var _ sandbox.Process = (*process)(nil)

// Exec implements [sandbox.Sandbox]. A relative Command.Dir is taken
// relative to [Root]. Spec.Env reaches the process through the lease's
// Secret, Command.Env (which wins) through the process's standard input.
func (l *lease) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return leasekit.Exec(cmd, func() (*process, error) {
		return l.start(ctx, execSpec{
			args: cmd.Args, env: cmd.Env, dir: cmd.Dir, stdin: cmd.Stdin, live: cmd.KeepStdinOpen,
			syncAfter: l.workspace != "",
		})
	})
}

// header is the wrapper's input header for nonce and env.
func header(nonce string, env map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString(nonce)
	b.WriteByte('\n')
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(shellQuote(env[k]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// shellQuote single-quotes v for the wrapper's eval, on one line: a
// newline is spelled "$nl" between quotes (the wrapper sets nl to one).
func shellQuote(v string) string {
	return strings.ReplaceAll(shquote.Quote(v), "\n", `'"$nl"'`)
}

// executor returns the exec stream of argv: the WebSocket executor, and the
// SPDY one (made only then) when the API server cannot upgrade to
// WebSockets.
func (l *lease) executor(argv []string, stdin bool) remotecommand.Executor {
	return l.executorIn(containerName, argv, stdin)
}

// executorIn is executor for a container of the pod.
func (l *lease) executorIn(container string, argv []string, stdin bool) remotecommand.Executor {
	u := l.p.cs.execURL(l.p.ns, l.name, &corev1.PodExecOptions{
		Container: container,
		Command:   argv,
		Stdin:     stdin,
		Stdout:    true,
		Stderr:    true,
	})
	return &fallbackExecutor{cfg: l.p.cfg, url: u}
}

type fallbackExecutor struct {
	cfg *rest.Config
	url *url.URL
}

func (e *fallbackExecutor) Stream(opts remotecommand.StreamOptions) error {
	return e.StreamWithContext(context.Background(), opts)
}

func (e *fallbackExecutor) StreamWithContext(ctx context.Context, opts remotecommand.StreamOptions) error {
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, http.MethodGet, e.url.String())
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "exec client")
	}
	err = ws.StreamWithContext(ctx, opts)
	if err == nil || !(httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)) {
		return err
	}
	spdy, serr := remotecommand.NewSPDYExecutor(e.cfg, http.MethodPost, e.url)
	if serr != nil {
		return outposterr.Wrap(outposterr.Configuration, serr, "exec client")
	}
	return spdy.StreamWithContext(ctx, opts)
}

// start runs es through the wrapper.
func (l *lease) start(ctx context.Context, es execSpec) (*process, error) {
	if l.rel.Released() {
		return nil, l.releasedError("exec " + es.args[0])
	}
	if err := l.goneError(); err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "exec %s", es.args[0])
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", es.args[0], err)
	}
	dir := leasekit.WorkDir(Root, es.dir)
	id := uuid.NewString()
	nonce := strings.ReplaceAll(id, "-", "")
	pidBase := "/tmp/outpost-" + id
	argv := append([]string{"sh", "-c", wrapperScript, "outpost-exec", pidBase, dir, leasekit.Flag(es.syncAfter)}, es.args...)
	ex := l.executor(argv, true)
	p := &process{
		l:          l,
		streamDone: make(chan struct{}),
		started:    make(chan struct{}),
		exited:     make(chan struct{}),
	}
	p.Proc = leasekit.NewProc(pidBase, signalScript, p.sendSignal)
	p.filter = newMarkerFilter(p.Err(), nonce, func() { close(p.started) }, p.onMarker)
	input := []io.Reader{bytes.NewReader(header(nonce, es.env)), bytes.NewReader(es.stdin)}
	switch {
	case es.stream != nil:
		input = append(input, es.stream)
	case es.live:
		pr, pw := io.Pipe()
		p.stdinPipe = pw
		p.SetStdin(&stdinWriter{w: pw})
		input = append(input, pr)
	}
	// The stream carries the exit status, so it outlives the caller's
	// context: a cancelled command is killed and its status still read.
	sctx, cancel := context.WithCancel(l.p.withLogger(context.WithoutCancel(ctx)))
	p.cancelStream = cancel
	go func() {
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{
			Stdin:  io.MultiReader(input...),
			Stdout: p.Out(),
			Stderr: p.filter,
		})
		p.filter.Flush()
		p.Out().CloseWrite()
		p.Err().CloseWrite()
		p.mu.Lock()
		p.streamErr = err
		p.mu.Unlock()
		close(p.streamDone)
	}()
	go p.watch(ctx, es.syncAfter)
	if err := p.waitStarted(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// waitStarted waits for the start marker, so Exec reports a pod or an API
// server that is gone, and returns once the command runs in its own group.
// A wrapper that ended before it started the command (say, the directory
// does not exist) leaves its status to Wait.
func (p *process) waitStarted(ctx context.Context) error {
	t := time.NewTimer(p.l.p.opts.OpTimeout)
	defer t.Stop()
	select {
	case <-p.started:
		return nil
	case <-p.Done():
		select {
		case <-p.started:
			return nil
		default:
		}
		_, err := p.Wait()
		return err
	case <-ctx.Done():
		return fmt.Errorf("exec in pod %s: %w", p.l.name, ctx.Err())
	case <-t.C:
		return outposterr.New(outposterr.Sandbox, "exec in pod %s did not start within %s", p.l.name, p.l.p.opts.OpTimeout)
	}
}

// onMarker records the exit marker.
func (p *process) onMarker(m exitMarker) {
	p.mu.Lock()
	p.marker = m
	p.mu.Unlock()
	close(p.exited)
}

// watch decides the process's status: from the exit marker, else from the
// end of the stream; a done context kills the process group; a pod that is
// deleted or ends fails the process at once.
func (p *process) watch(ctx context.Context, syncAfter bool) {
	defer p.Finish()
	l := p.l
	ctxDone, closing := ctx.Done(), p.Closing()
	var giveUp <-chan time.Time
	for {
		select {
		case <-p.exited:
			p.mu.Lock()
			m := p.marker
			p.mu.Unlock()
			st := leasekit.StatusOf(m.code)
			st.OOMKilled = m.oomKills > 0 && !p.Killed()
			var err error
			if syncAfter && m.changed && !l.rel.Releasing() {
				err = l.syncWorkspace(context.WithoutCancel(ctx))
			}
			p.SetExit(st, err)
			return
		case <-p.streamDone:
			select {
			case <-p.exited:
				continue // the marker came with the last bytes
			default:
			}
			p.SetExit(p.streamEnd(ctx))
			return
		case <-l.gone:
			switch {
			case l.rel.Releasing():
				p.SetExit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, nil)
			case l.oomKilled():
				// The memory limit ended the container and with it the
				// command: the limit's doing, reported as for a command the
				// kernel killed.
				p.SetExit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL", OOMKilled: true}, nil)
			default:
				p.SetExit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, outposterr.Wrap(outposterr.Sandbox, l.goneError(), "exec"))
			}
			p.cancelStream()
			return
		case <-ctxDone:
			ctxDone = nil
			if err := p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, false); err != nil {
				l.p.log.Debug("kill on cancel", "pod", l.name, "err", err)
			}
			giveUp = time.After(l.p.opts.OpTimeout)
		case <-closing:
			closing = nil
			if giveUp == nil {
				giveUp = time.After(l.p.opts.OpTimeout)
			}
		case <-giveUp:
			p.cancelStream()
			p.SetExit(sandbox.ExitStatus{Code: -1}, outposterr.New(outposterr.Sandbox,
				"exec in pod %s did not report its exit within %s", l.name, l.p.opts.OpTimeout))
			return
		}
	}
}

// streamEnd turns the end of a stream that brought no exit marker into a
// status: the wrapper's own exit code, or an error about the pod or the API
// server.
func (p *process) streamEnd(ctx context.Context) (sandbox.ExitStatus, error) {
	l := p.l
	p.mu.Lock()
	err := p.streamErr
	p.mu.Unlock()
	killed := p.Killed()
	var ce utilexec.ExitError
	switch {
	case err == nil:
		return sandbox.ExitStatus{}, nil
	case errors.As(err, &ce):
		return leasekit.StatusOf(ce.ExitStatus()), nil
	case l.rel.Releasing():
		return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, nil
	case leasekit.IsClosed(p.Closing()) && killed:
		return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, nil
	}
	if gerr := l.goneError(); gerr != nil {
		if l.oomKilled() {
			return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL", OOMKilled: true}, nil
		}
		return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, outposterr.Wrap(outposterr.Sandbox, gerr, "exec")
	}
	// Ask about the pod: deleted under us, or the API server gone?
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	pod, gerr := l.p.cs.getPod(gctx, l.p.ns, l.name)
	cancel()
	switch {
	case apierrors.IsNotFound(gerr):
		return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, outposterr.Wrap(outposterr.Sandbox, err, "exec: pod %s was deleted", l.name)
	case gerr != nil:
		return sandbox.ExitStatus{Code: -1}, apiError(errors.Join(err, gerr), "exec in pod %s: lost the stream", l.name)
	case goneReason(l.name, pod) != "":
		return sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, outposterr.Wrap(outposterr.Sandbox, err, "exec: %s", goneReason(l.name, pod))
	}
	return sandbox.ExitStatus{Code: -1}, outposterr.Wrap(outposterr.Sandbox, err, "exec in pod %s: stream failed", l.name)
}

// sendSignal runs the signal script's argv. A pod that is gone has nothing
// left to signal.
func (p *process) sendSignal(ctx context.Context, argv []string) error {
	if p.l.rel.Released() || p.l.goneError() != nil {
		return nil
	}
	if _, err := p.l.quick(ctx, argv); err != nil {
		if p.l.goneError() != nil || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// closeGrace is how long Close waits for the stream of an exited command to
// end by itself before it kills what is left of the group.
const closeGrace = 250 * time.Millisecond

// Close implements [sandbox.Process]. It kills what is left of the process
// group unless the stream ended by itself (then nothing of the group held
// the output), ends the stream and unblocks readers.
func (p *process) Close() error {
	return p.CloseWith(func() bool {
		if leasekit.IsClosed(p.exited) {
			// The wrapper has exited; the stream normally ends a moment
			// later, and then nothing needs killing.
			t := time.NewTimer(closeGrace)
			select {
			case <-p.streamDone:
			case <-t.C:
			}
			t.Stop()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		var ce utilexec.ExitError
		return !(leasekit.IsClosed(p.streamDone) && (p.streamErr == nil || errors.As(p.streamErr, &ce)))
	}, func() {
		if p.stdinPipe != nil {
			_ = p.stdinPipe.Close()
		}
		p.cancelStream()
	})
}

// stdinWriter is the live stdin of a process started with KeepStdinOpen.
type stdinWriter struct {
	w    *io.PipeWriter
	once sync.Once
}

// Write sends b to the process after Command.Stdin.
func (w *stdinWriter) Write(b []byte) (int, error) { return w.w.Write(b) }

// Close closes the process's stdin.
func (w *stdinWriter) Close() error {
	w.once.Do(func() { _ = w.w.Close() })
	return nil
}

// quickOutputMax bounds what quick keeps of a command's stdout.
const quickOutputMax = 1 << 20

// quick runs a short command (no wrapper, no input) as the lease user under
// the op timeout and returns its stdout; a non-zero exit is an error
// carrying its stderr.
func (l *lease) quick(ctx context.Context, argv []string) ([]byte, error) {
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	ex := l.executor(argv, false)
	// Locked buffers: on a cancelled context StreamWithContext returns
	// while the client's copy goroutines may still write.
	stdout, stderr := &leasekit.TailBuffer{Max: quickOutputMax}, &leasekit.TailBuffer{Max: 4096}
	err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	if err != nil {
		var ce utilexec.ExitError
		if errors.As(err, &ce) {
			return stdout.Bytes(), fmt.Errorf("%s exited %d: %s", argv[0], ce.ExitStatus(), bytes.TrimSpace(stderr.Bytes()))
		}
		return nil, apiError(err, "exec %s in pod %s", argv[0], l.name)
	}
	return stdout.Bytes(), nil
}

// exitMarker is what the wrapper reports when its command ended.
type exitMarker struct {
	code     int
	oomKills int
	changed  bool // the workspace changed since the last sync
}

// newMarkerFilter returns the writer of the exec's stderr: it passes the
// stream through to w and takes the wrapper's start and exit markers out
// of it, also when a marker is split across writes. After the exit marker
// everything passes unread.
func newMarkerFilter(w io.Writer, nonce string, onStart func(), onExit func(exitMarker)) *leasekit.Markers {
	started := false
	return &leasekit.Markers{W: w, Prefix: []byte("\x1eoutpost:" + nonce + ":"), End: 0x1e, Max: maxMarkerTail,
		Take: func(payload string) (ok, last bool) {
			if payload == "start" {
				if !started {
					started = true
					onStart()
				}
				return true, false
			}
			m, ok := parseExitMarker(payload)
			if ok {
				onExit(m)
			}
			return ok, ok
		}}
}

// maxMarkerTail bounds the part of a marker after the prefix
// ("exit:CODE:OOMKILLS:CHANGED").
const maxMarkerTail = 48

// parseExitMarker reads an exit marker's payload.
func parseExitMarker(payload string) (exitMarker, bool) {
	rest, ok := strings.CutPrefix(payload, "exit:")
	if !ok {
		return exitMarker{}, false
	}
	fields := strings.Split(rest, ":")
	if len(fields) != 3 || (fields[2] != "0" && fields[2] != "1") {
		return exitMarker{}, false
	}
	c, err1 := strconv.Atoi(fields[0])
	o, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil || c < 0 || c > 255 || o < 0 {
		return exitMarker{}, false
	}
	return exitMarker{code: c, oomKills: o, changed: fields[2] == "1"}, true
}
