package docker

import (
	"bytes"
	"context"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/internal/shquote"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// A lease's first command can run without an exec. An exec costs the
// engine a process of its own (create, the runtime's exec, an inspect for
// the status), where `docker run` runs its command as the container's own
// process. So the keeper, the container's main process, runs one command
// itself: the provider writes "outpost-run N" and N bytes of shell it
// generated (runScript) on the lifeline, the keeper evaluates them and
// runs the command, its output on the container's stdout and stderr,
// which the lifeline's attach carries back (serveLifeline). When the
// command has exited, a line on each stream ends its output and reports
// its status; both carry a random nonce the command is never given (not in
// its argv, environment or stdin), so its own output cannot end it early
// by chance. A command that reads the keeper's memory (same user, where
// the kernel lets it) could forge them: that ends its output and reports a
// status of its choosing, which exiting does as well.
//
// The keeper runs one command a lease at most, the first Exec that can go
// this way: one whose stdin is a small text given in full (no
// KeepStdinOpen, no NUL byte), on a Docker engine (not Podman), in an
// image with head(1) (the keeper says so when it starts). Every other
// command is an exec, as before. A command run by the keeper behaves as an
// exec: its own process group, the same wrapper, the same signals, the
// same environment and user, Wait at its own exit. One difference: its
// output goes through the container's streams, so output written after
// its exit by something it left running is dropped, not read until Close.

// maxKeeperStdin is the largest stdin a command run by the keeper takes
// (it travels quoted inside the shell the keeper evaluates).
const maxKeeperStdin = 256 << 10

// keeperState is a lease's side of the keeper running a command.
type keeperState struct {
	ready chan struct{} // closed once the keeper said whether it runs commands
	runs  bool          // written before ready is closed
	taken atomic.Bool   // the keeper was given its command (or never will be)

	mu    sync.Mutex
	run   *runProc // the command whose output the stream carries
	ended bool     // the lifeline's stream ended
}

// serveLifeline reads the lifeline's output for as long as the container
// lives: the keeper's first line, then the output of the command it runs
// (routed to that command's pipes), and anything else, discarded. A
// stream that is never read would hold up whatever writes to it.
func (l *lease) serveLifeline(s *lifeStream) {
	line, err := s.line()
	l.keeper.runs = err == nil && line == keeperRuns
	close(l.keeper.ready)
	if err == nil {
		err = s.copyTo(keeperStream{&l.keeper, false}, keeperStream{&l.keeper, true})
	}
	if err != nil {
		l.p.log.Debug("lifeline stream", "container", shortID(l.id), "err", err)
	}
	l.keeper.mu.Lock()
	l.keeper.ended = true
	rp := l.keeper.run
	l.keeper.mu.Unlock()
	if rp != nil {
		rp.streamEnded()
	}
}

// keeperStream is stdout or stderr of the lifeline's stream: it goes to
// the command the keeper runs, if any, and is discarded otherwise.
type keeperStream struct {
	k      *keeperState
	stderr bool
}

func (w keeperStream) Write(b []byte) (int, error) {
	w.k.mu.Lock()
	rp := w.k.run
	w.k.mu.Unlock()
	switch {
	case rp == nil:
	case w.stderr:
		_, _ = rp.errw.Write(b)
	default:
		_, _ = rp.outw.Write(b)
	}
	return len(b), nil
}

// keeperCanRun reports whether cmd can be given to the keeper, and takes
// the keeper for it if so.
func (l *lease) keeperCanRun(ctx context.Context, cmd sandbox.Command) bool {
	if l.keeper.ready == nil || cmd.KeepStdinOpen || len(cmd.Stdin) > maxKeeperStdin ||
		bytes.IndexByte(cmd.Stdin, 0) >= 0 || l.keeper.taken.Load() {
		return false
	}
	t := time.NewTimer(l.p.opts.OpTimeout)
	defer t.Stop()
	select {
	case <-l.keeper.ready:
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
	return l.keeper.runs && l.keeper.taken.CompareAndSwap(false, true)
}

// runProc is a command the keeper runs; it implements [sandbox.Process]
// with the shared [leasekit.Proc].
type runProc struct {
	*leasekit.Proc
	l       *lease
	started time.Time

	outw, errw *leasekit.Markers // written by serveLifeline only

	exited  chan runExit  // the status report (one send)
	ended   chan struct{} // closed when the lifeline's stream ended
	end     sync.Once     // closes ended
	natural atomic.Bool   // the exit came with its report
	left    atomic.Bool   // the report said something of the group was left
}

// runExit is a command's status as the keeper reports it.
type runExit struct {
	code      int
	neverRan  bool // the working directory or the stdin file could not be set up
	leftovers bool // a process of its group outlived it holding its output
	bad       bool // the report could not be read
}

var (
	_ sandbox.Process       = (*runProc)(nil)
	_ sandbox.LimitReporter = (*runProc)(nil)
)

// keeperRun gives cmd (whose environment is env) to the keeper and
// returns its process.
func (l *lease) keeperRun(ctx context.Context, cmd sandbox.Command, env map[string]string) (*runProc, error) {
	name := cmd.Args[0]
	if l.rel.Released() {
		return nil, outposterr.New(outposterr.Sandbox, "exec %s: lease %s was released", name, shortID(l.id))
	}
	nonce := strings.ReplaceAll(uuid.NewString(), "-", "")
	pidBase := "/tmp/outpost-" + uuid.NewString()
	rp := &runProc{l: l, started: time.Now(), exited: make(chan runExit, 1), ended: make(chan struct{})}
	rp.Proc = leasekit.NewProc(pidBase, signalScript, l.sendSignal)
	rp.outw, rp.errw = reportWriters(rp.Out(), rp.Err(), nonce, func(e runExit) { rp.exited <- e })

	l.keeper.mu.Lock()
	ended := l.keeper.ended
	if !ended {
		l.keeper.run = rp
	}
	l.keeper.mu.Unlock()
	if ended {
		return nil, outposterr.New(outposterr.Sandbox, "exec %s: container %s ended", name, shortID(l.id))
	}
	script := runScript(cmd.Args, env, leasekit.WorkDir(Root, cmd.Dir), pidBase, nonce, cmd.Stdin)
	req := "outpost-run " + strconv.Itoa(len(script)) + "\n" + script
	l.lifeMu.Lock()
	conn := l.lifeline
	l.lifeMu.Unlock()
	if conn == nil {
		return nil, outposterr.New(outposterr.Sandbox, "exec %s: lease %s was released", name, shortID(l.id))
	}
	if _, err := io.WriteString(conn, req); err != nil {
		// The keeper may hold half a request: the lease is lost.
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "exec %s: give the command to the keeper of %s", name, shortID(l.id))
	}
	go rp.watch(ctx)
	return rp, nil
}

// The lines that end a command's output: runEndMark NONCE ":" on stdout,
// runExitMark NONCE ":" STATUS ":" LEFT on stderr, each ending in a
// newline. STATUS is the exit code (128+n for signal n) or "x" when the
// command never started; LEFT is 1 when processes of its group outlived it.
const (
	runEndMark  = "\x1eoutpost-end:"
	runExitMark = "\x1eoutpost-exit:"
)

// runScript is what the keeper evaluates to run argv, in the foreground
// (a command in the background would start with SIGINT and SIGQUIT
// ignored, which no shell can undo): a background watcher takes over the
// lifeline meanwhile and, if it ends, kills the keeper's process group,
// whose end ends the container and everything in it; the keeper changes to
// dir, writes stdin to a file, and runs argv in a subshell that exports
// env, opens and removes that file and becomes [wrapperScript], as an exec
// does; then it stops the watcher and reports, saying whether a process of
// the command's group outlived it holding its output for a quarter of a
// second (which Close then kills, as it does for an exec whose stream such
// a process holds open: a background child that is about to redirect its
// output is given that moment). Once the command ran, the keeper forks
// nothing: a shell that cannot fork exits, and a command that filled the
// lease's process limit must not end the lease with it. (So the quarter
// of a second is counted on /proc/uptime, not slept.) The keeper's own stderr goes to
// /dev/null (a shell reports a command killed by a signal there,
// "Killed"); the command's and the report go to the container's, kept as
// fd 3. Every value is single-quoted; nothing of it is parsed.
func runScript(argv []string, env map[string]string, dir, pidBase, nonce string, stdin []byte) string {
	var b strings.Builder
	b.WriteString("exec 3>&2 2>/dev/null 4<&0\n")
	b.WriteString("(while read -r _; do :; done; kill -s KILL 0) <&4 &\nw=$!\n")
	b.WriteString("p=" + shquote.Quote(pidBase) + "\n")
	setup := "cd -- " + shquote.Quote(dir)
	if len(stdin) > 0 {
		setup += " && printf %s " + shquote.Quote(string(stdin)) + ` >"$p.in"`
	}
	b.WriteString("if " + setup + "; then\n(")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString("export " + shquote.Quote(k+"="+env[k]) + "\n")
	}
	if len(stdin) > 0 {
		b.WriteString(`exec <"$p.in"; rm -f -- "$p.in"` + "\n")
	} else {
		b.WriteString("exec </dev/null\n")
	}
	b.WriteString("exec sh -c " + shquote.Quote(wrapperScript) + ` outpost-exec "$p"`)
	for _, a := range argv {
		b.WriteString(" " + shquote.Quote(a))
	}
	b.WriteString(" 2>&3 3>&- 4<&-)\n")
	b.WriteString(`s=$? r=0
held() {
for d in /proc/[0-9]*; do
read -r q <"$d/stat" || continue
q=${q##*) }; set -- $q
if [ "$3" = "$g" ] && { [ "$d/fd/1" -ef /proc/$$/fd/1 ] || [ "$d/fd/2" -ef /proc/$$/fd/3 ]; }; then return 0; fi
done
return 1
}
if [ -s "$p.pid" ] && read -r g <"$p.pid" && kill -s 0 -- "-$g" && held; then
read -r t0 _ </proc/uptime; t0=${t0%.*}${t0#*.}
while held; do
read -r t _ </proc/uptime; t=${t%.*}${t#*.}
if [ $((t - t0)) -ge 25 ]; then r=1; break; fi
done
fi
else s=x r=0; fi
kill "$w"
printf '` + strings.ReplaceAll(runEndMark, "\x1e", `\036`) + `%s:\n' ` + nonce + `
printf '` + strings.ReplaceAll(runExitMark, "\x1e", `\036`) + `%s:%s:%s\n' ` + nonce + ` "$s" "$r" >&3
exec 2>&3 3>&- 4<&-
cd /
`)
	return b.String()
}

// parseRunExit reads the STATUS:LEFT of an exit report.
func parseRunExit(f string) runExit {
	status, left, ok := strings.Cut(f, ":")
	if !ok || (left != "0" && left != "1") {
		return runExit{bad: true}
	}
	if status == "x" {
		return runExit{neverRan: true}
	}
	code, err := strconv.Atoi(status)
	if err != nil || code < 0 || code > 255 {
		return runExit{bad: true}
	}
	return runExit{code: code, leftovers: left == "1"}
}

// reportWriters return the writers of the command's stdout and stderr as
// the lifeline's stream carries them: each passes the output on to its
// pipe up to its report line, then ends the pipe; stderr's report, the
// exit status, goes to exited.
func reportWriters(out, errOut *leasekit.Pipe, nonce string, exited func(runExit)) (outw, errw *leasekit.Markers) {
	outw = &leasekit.Markers{W: out, Prefix: []byte(runEndMark + nonce + ":"), End: '\n', Max: maxReportField,
		DropAfter: true, Take: func(string) (bool, bool) {
			out.CloseWrite()
			return true, true
		}}
	errw = &leasekit.Markers{W: errOut, Prefix: []byte(runExitMark + nonce + ":"), End: '\n', Max: maxReportField,
		DropAfter: true, Take: func(f string) (bool, bool) {
			errOut.CloseWrite()
			exited(parseRunExit(f))
			return true, true
		}}
	return outw, errw
}

// maxReportField bounds a report line after its marker.
const maxReportField = 64

// streamEnded is called once the lifeline's stream ended: the container's
// processes are gone. What a report writer held back goes out.
func (rp *runProc) streamEnded() {
	rp.outw.Flush()
	rp.errw.Flush()
	rp.Out().CloseWrite()
	rp.Err().CloseWrite()
	rp.end.Do(func() { close(rp.ended) })
}

// watch waits for the command's status report. A done context kills its
// process group; a stream that ends first (the container is gone) or no
// report within the op timeout after the kill or Close end the wait.
func (rp *runProc) watch(ctx context.Context) {
	defer rp.Finish()
	l := rp.l
	giveUp := rp.GiveUpAfter(ctx, l.p.opts.OpTimeout, func(err error) {
		l.p.log.Debug("kill on cancel", "container", shortID(l.id), "err", err)
	})
	select {
	case e := <-rp.exited:
		rp.finish(ctx, e)
	case <-rp.ended:
		select {
		case e := <-rp.exited:
			rp.finish(ctx, e)
			return
		default:
		}
		var err error
		if !l.rel.Releasing() {
			err = outposterr.New(outposterr.Sandbox, "%s: container %s ended while the command ran", rp.PIDBase(), shortID(l.id))
		}
		rp.SetExit(sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, err)
	case <-giveUp:
		rp.SetExit(sandbox.ExitStatus{Code: -1}, outposterr.New(outposterr.Sandbox,
			"the command run by the keeper of %s did not report its exit within %s", shortID(l.id), l.p.opts.OpTimeout))
	}
}

// finish records the status the keeper reported (see [process.finish] for
// how codes are read).
func (rp *runProc) finish(ctx context.Context, e runExit) {
	l := rp.l
	switch {
	case e.bad:
		rp.SetExit(sandbox.ExitStatus{Code: -1}, outposterr.New(outposterr.Sandbox, "unreadable exit report from the keeper of %s", shortID(l.id)))
		return
	case e.neverRan:
		rp.SetExit(sandbox.ExitStatus{Code: 126}, outposterr.New(outposterr.Sandbox,
			"exec did not start in %s: no usable working directory, or no room for its stdin", shortID(l.id)))
		return
	}
	rp.left.Store(e.leftovers)
	rp.natural.Store(true)
	st := sandbox.ExitStatus{Code: e.code}
	if e.code != 0 {
		likely := e.code == 128+9 && !rp.Killed() && !l.rel.Releasing()
		st.OOMKilled = l.oomSince(context.WithoutCancel(ctx), "", rp.started, likely)
	}
	if dec := leasekit.StatusOf(e.code); dec.Signal != "" {
		st.Code, st.Signal = dec.Code, dec.Signal
	}
	rp.SetExit(st, nil)
}

// Close implements [sandbox.Process]: it kills what is left of the process
// group unless the command's report said nothing of it held its output (a
// daemonised grandchild that closed its output survives until Release, as
// after an exec).
func (rp *runProc) Close() error {
	return rp.CloseWith(func() bool {
		return !(leasekit.IsClosed(rp.Done()) && rp.natural.Load() && !rp.left.Load())
	}, func() {})
}

// LimitsReached implements [sandbox.LimitReporter] as [process.LimitsReached].
func (rp *runProc) LimitsReached(ctx context.Context) []string {
	if rp.l.pidsLimitReached(ctx) {
		return []string{sandbox.LimitPids}
	}
	return nil
}
