package leasekit

import (
	"context"
	"io"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Proc is what a container kind's process shares with every other kind's:
// its output pipes, its live stdin, its exit status, how a signal reaches its
// process group and how Close ends it. A kind's process embeds a *Proc, which
// implements every [sandbox.Process] method but Close, and adds how it
// starts, watches and ends its command.
//
// Every kind starts a command through a wrapper that records the pid of the
// command's process group in PIDBASE.pid and honours a cancellation marker
// PIDBASE.cancel left before it wrote that pid. Signals go through the kind's
// signal script: sh -c SCRIPT outpost-signal PIDBASE SIGNAME MARK CLEAN
// (MARK=1 leaves the marker first, CLEAN=1 removes the pid file afterwards),
// run by the kind's send function as a short command in the lease.
type Proc struct {
	stdout, stderr *Pipe
	stdin          io.WriteCloser // nil unless the command keeps stdin open

	pidBase string
	script  string
	send    func(ctx context.Context, argv []string) error

	done      chan struct{} // closed when the status is final
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	killed  bool // Outpost sent SIGKILL to the group
	status  sandbox.ExitStatus
	waitErr error
}

// NewProc returns the shared state of a process whose wrapper records its
// group under pidBase. script is the kind's signal script; send runs its
// argv in the lease and returns nil when the lease has nothing left to
// signal (it is gone).
func NewProc(pidBase, script string, send func(ctx context.Context, argv []string) error) *Proc {
	return &Proc{
		stdout: NewPipe(), stderr: NewPipe(),
		pidBase: pidBase, script: script, send: send,
		done: make(chan struct{}), closing: make(chan struct{}),
	}
}

// Out and Err are the pipes the kind writes the command's output into.
func (p *Proc) Out() *Pipe { return p.stdout }

// Err is the pipe of the command's stderr; see [Proc.Out].
func (p *Proc) Err() *Pipe { return p.stderr }

// SetStdin sets the live stdin [Proc.Stdin] returns; call it before the
// process is handed out.
func (p *Proc) SetStdin(w io.WriteCloser) { p.stdin = w }

// PIDBase is where the wrapper records the command's group.
func (p *Proc) PIDBase() string { return p.pidBase }

// Done is closed when the status is final ([Proc.Finish]).
func (p *Proc) Done() <-chan struct{} { return p.done }

// Closing is closed when Close was called.
func (p *Proc) Closing() <-chan struct{} { return p.closing }

// SetExit records the status Wait returns; the last call before Finish wins.
func (p *Proc) SetExit(st sandbox.ExitStatus, err error) {
	p.mu.Lock()
	p.status, p.waitErr = st, err
	p.mu.Unlock()
}

// Finish makes the recorded status final and releases Wait. Call it once,
// when the kind's watch ends.
func (p *Proc) Finish() { close(p.done) }

// Killed reports whether Outpost sent SIGKILL to the group (a SIGKILL it
// did not send is the OOM killer's, or someone else's).
func (p *Proc) Killed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// Stdout implements [sandbox.Process].
func (p *Proc) Stdout() io.Reader { return p.stdout }

// Stderr implements [sandbox.Process].
func (p *Proc) Stderr() io.Reader { return p.stderr }

// Stdin implements [sandbox.Process].
func (p *Proc) Stdin() io.WriteCloser { return p.stdin }

// Wait implements [sandbox.Process]: it returns once the status is final.
func (p *Proc) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.waitErr
}

// Signal implements [sandbox.Process]: a short command signals the whole
// group. The signals that end a process (SIGTERM, SIGKILL, SIGINT, SIGHUP,
// SIGQUIT) also leave the cancellation marker, so a command whose wrapper
// has not recorded its group yet does not start.
func (p *Proc) Signal(sig syscall.Signal) error {
	switch sig {
	case 0:
		return nil
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT:
		return p.SignalGroup(context.Background(), sig, true, false)
	}
	return p.SignalGroup(context.Background(), sig, false, false)
}

// SignalGroup runs the signal script for sig; mark leaves the cancellation
// marker first, clean removes the pid file afterwards.
func (p *Proc) SignalGroup(ctx context.Context, sig syscall.Signal, mark, clean bool) error {
	name := HostSignalName(sig)
	if name == "" {
		return outposterr.New(outposterr.Configuration, "unknown signal %d", int(sig))
	}
	if sig == syscall.SIGKILL {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
	}
	return p.send(ctx, []string{"sh", "-c", p.script, "outpost-signal", p.pidBase, name[3:], Flag(mark), Flag(clean)})
}

// GiveUpAfter is how a kind's watch stops waiting for an exit that does
// not come: once ctx is done it kills the process group (logKill gets the
// error of that kill), and timeout after that kill or after Close,
// whichever comes first, the returned channel is closed: the watch then
// records that the exit was not observed. Nothing happens once the status
// is final.
func (p *Proc) GiveUpAfter(ctx context.Context, timeout time.Duration, logKill func(error)) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-p.closing:
		case <-p.done:
		}
		if IsClosed(p.done) {
			return
		}
		if ctx.Err() != nil {
			if err := p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, false); err != nil {
				logKill(err)
			}
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-t.C:
			close(out)
		case <-p.done:
		}
	}()
	return out
}

// CloseWith is the kind's Close: once, it marks the process closing, kills
// what is left of the group when leftovers says something may be, runs
// release (the kind ends its stream) and closes the output pipes, which
// unblocks readers. It returns the error of that kill.
func (p *Proc) CloseWith(leftovers func() bool, release func()) error {
	p.closeOnce.Do(func() {
		close(p.closing)
		if leftovers() {
			p.closeErr = p.SignalGroup(context.Background(), syscall.SIGKILL, true, true)
		}
		release()
		p.stdout.Close()
		p.stderr.Close()
	})
	return p.closeErr
}

// Exec is a container kind's [sandbox.Sandbox.Exec] around the kind's
// start: a command [sandbox.Command.Validate] refuses is a configuration
// error and start is not called; a start that fails returns a nil Process,
// never a nil P inside a non-nil interface.
func Exec[P Process](cmd sandbox.Command, start func() (P, error)) (sandbox.Process, error) {
	if err := cmd.Validate(); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "exec")
	}
	p, err := start()
	if err != nil {
		return nil, err
	}
	return p, nil
}

// StatusOf decodes an exit code. Containers report a command killed by
// signal n as 128+n, the encoding shells use, so codes 129..159 are
// reported as death by that signal (Code -1, Signal set), also when a
// program chose such a code itself.
func StatusOf(code int) sandbox.ExitStatus {
	if code > 128 && code <= 128+31 {
		if name := LinuxSignalName(code - 128); name != "" {
			return sandbox.ExitStatus{Code: -1, Signal: name}
		}
	}
	return sandbox.ExitStatus{Code: code}
}

// WorkDir is a command's working directory in a lease whose workspace is
// root: root when dir is empty, under root when dir is relative.
func WorkDir(root, dir string) string {
	switch {
	case dir == "":
		return root
	case !path.IsAbs(dir):
		return path.Join(root, dir)
	}
	return dir
}

// Flag is a boolean argument of a wrapper script: "1" or "0".
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// IsClosed reports whether c is closed.
func IsClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
