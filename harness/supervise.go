package harness

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/sandbox"
)

// line is one output line from stdout or stderr.
type line struct {
	data      []byte
	stderr    bool
	oversized bool // the line exceeded Limits' line bound and was dropped
}

// exitResult is what Process.Wait returned.
type exitResult struct {
	st  sandbox.ExitStatus
	err error
}

// supervise streams the process's output into the collector until the
// process exits (plus the drain window), enforcing deadline, idle timeout,
// settle window and cancellation.
//
// With a steer (interrupt-and-resume live input) a caller message stops the
// CLI with SIGINT once it has named its conversation and before its final
// event; the messages are left in the steer for the next attempt.
func supervise(parent, turnCtx context.Context, t Turn, proc sandbox.Process, col *collector, feed *liveFeed, st *steer, br *bridged) verdict {
	s := startSupervisor(parent, turnCtx, t, proc, col, feed, st, br)
	s.watch()
	s.drain()
	s.end()
	return s.v
}

// supervisor is one supervise call: the process, where its output lines
// and its exit arrive, and what was decided so far.
type supervisor struct {
	parent, turnCtx context.Context
	lim             Limits
	stopOnQuota     bool // Turn.StopOnQuotaRetry
	proc            sandbox.Process
	col             *collector
	feed            *liveFeed
	st              *steer
	br              *bridged
	v               verdict

	// lineCh carries both readers' lines; closing quit ends the readers,
	// and readersDone is closed once both have returned.
	lineCh      chan line
	quit        chan struct{}
	readersDone chan struct{}
	// exitCh carries the process's exit; whoever takes it puts it back.
	exitCh chan exitResult
	// settle fires when the settle window after the final event ends;
	// killWait when a stopped process is abandoned.
	settle, killWait <-chan time.Time
	stopOnce         sync.Once
	// stopped is closed once a stop is done: the process exited within
	// the kill grace, or SIGKILL was sent.
	stopped chan struct{}
}

// startSupervisor starts reading the process's stdout and stderr and
// waiting for its exit.
func startSupervisor(parent, turnCtx context.Context, t Turn, proc sandbox.Process, col *collector, feed *liveFeed, st *steer, br *bridged) *supervisor {
	lim := t.Limits
	s := &supervisor{
		parent: parent, turnCtx: turnCtx, lim: lim, stopOnQuota: t.StopOnQuotaRetry,
		proc: proc, col: col, feed: feed, st: st, br: br,
		v: verdict{deadline: lim.Deadline, idle: lim.IdleTimeout},
		// A few lines in flight: each may be up to MaxLineBytes.
		lineCh:      make(chan line, 16),
		quit:        make(chan struct{}),
		readersDone: make(chan struct{}),
		exitCh:      make(chan exitResult, 1),
		stopped:     make(chan struct{}),
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go readLines(proc.Stdout(), false, s.lineCh, s.quit, &readers)
	go readLines(proc.Stderr(), true, s.lineCh, s.quit, &readers)
	readersDone := s.readersDone
	go func() { readers.Wait(); close(readersDone) }()
	exitCh := s.exitCh
	go func() {
		st, err := proc.Wait()
		exitCh <- exitResult{st, err}
	}()
	return s
}

// watch collects the output and takes the caller's messages until the
// process exits, stopping the CLI when the turn is over: idle timeout,
// settle window, budget refused by the gateway, the turn's context done.
// It gives up on a stopped process that does not report its exit.
func (s *supervisor) watch() {
	idle := time.NewTimer(s.lim.IdleTimeout)
	defer idle.Stop()
	done := s.turnCtx.Done()
	var spent <-chan struct{} // the gateway refuses the turn's requests
	if s.br != nil && s.br.budget != nil {
		spent = s.br.grant.Refused()
	}
	messages := s.feed.messages()
	if s.st != nil {
		messages = s.st.src
	}
	for {
		// A full queue stops taking messages: the caller's sends block
		// (backpressure) until the CLI has taken some.
		in := messages
		if (s.st != nil && s.st.full()) || s.feed.full() {
			in = nil
		}
		select {
		case l := <-s.lineCh:
			s.handle(l)
			resetTimer(idle, s.lim.IdleTimeout)
		case <-spent:
			spent = nil
			s.refused()
		case <-s.feed.room():
			// The CLI took messages: a full feed may take more.
		case m, ok := <-in:
			if !ok {
				messages = nil
				continue
			}
			s.take(m)
		case r := <-s.exitCh:
			s.v.exit, s.v.exited = r.st, r.err == nil
			if r.err != nil {
				s.col.warn("wait for CLI: " + r.err.Error())
			}
			s.exitCh <- r // terminate may be waiting on it too
			return
		case <-idle.C:
			s.stop(stopIdle, nil)
		case <-s.settle:
			s.settle = nil
			s.stop(stopSettled, nil)
		case <-done:
			done = nil
			if s.col.finishedOK() {
				s.stop(stopSettled, nil)
			} else {
				s.stop(contextStop(s.parent), context.Cause(s.turnCtx))
			}
		case <-s.killWait:
			// The process did not report its exit even after SIGKILL.
			s.col.warn("CLI did not exit after SIGKILL; abandoning it")
			return
		}
	}
}

// stop stops the CLI for r (cause: the context error behind it, if any),
// the first call only: SIGTERM, or SIGINT to steer, then SIGKILL after
// the kill grace. Every call gives the process that grace and ten seconds
// more to report its exit before watch abandons it.
func (s *supervisor) stop(r stopReason, cause error) {
	s.stopOnce.Do(func() {
		s.v.stop, s.v.cause = r, cause
		sig := syscall.SIGTERM
		if r == stopSteered {
			sig = syscall.SIGINT // what a person at the terminal would press
		}
		proc, grace, exitCh, stopped := s.proc, s.lim.KillGrace, s.exitCh, s.stopped
		go func() {
			defer close(stopped)
			terminate(proc, sig, grace, exitCh)
		}()
	})
	s.killWait = time.After(s.lim.KillGrace + 10*time.Second)
}

// steerNow interrupts the CLI for waiting messages once it can be
// continued: it named its conversation and has not finished.
func (s *supervisor) steerNow() {
	if s.st.waiting() && s.col.res.Conversation != "" && s.col.finished == nil && s.v.stop == stopNone {
		s.st.interrupted = true
		s.stop(stopSteered, nil)
	}
}

// handle collects one output line. After a stdout line: the final event
// starts the settle window; quota retry chatter (with StopOnQuotaRetry)
// or a budget overrun before the final event stops the CLI; the live feed
// writes what is due (see liveFeed.afterLine), and waiting messages may
// steer.
func (s *supervisor) handle(l line) {
	col := s.col
	if l.oversized {
		col.warn(oversizedWarning)
		return
	}
	if l.stderr {
		col.stderrLine(l.data)
		return
	}
	hadFinished := col.finished != nil
	col.stdoutLine(l.data)
	if !hadFinished && col.finished != nil {
		s.settle = time.After(s.lim.Settle)
	}
	if s.stopOnQuota && col.quotaChatter != nil && col.finished == nil {
		s.stop(stopQuota, nil)
	}
	if col.over != nil && col.finished == nil && s.v.stop == stopNone {
		s.stop(stopBudget, nil)
	}
	s.feed.afterLine()
	s.steerNow()
}

// refused stops the CLI when the gateway refused the turn's requests over
// its budget before the final event, keeping the first overrun seen.
func (s *supervisor) refused() {
	if hit := s.br.over(); hit != nil && s.col.finished == nil && s.v.stop == stopNone {
		if s.col.over == nil {
			s.col.over = hit
		}
		s.stop(stopBudget, nil)
	}
}

// take queues a caller message: with a steer there, which may interrupt
// the CLI for it now; else in the live feed.
func (s *supervisor) take(m string) {
	if s.st != nil {
		s.st.add(m)
		s.steerNow()
		return
	}
	s.feed.add(m)
}

// drain collects the output already in flight for a short while (the
// drain window), or until both streams are closed and what they left
// buffered is taken.
func (s *supervisor) drain() {
	drain := time.NewTimer(s.lim.Drain)
	defer drain.Stop()
	for {
		select {
		case l := <-s.lineCh:
			s.handle(l)
		case <-s.readersDone:
			// Both streams are closed; take what is still buffered.
			for {
				select {
				case l := <-s.lineCh:
					s.handle(l)
				default:
					return
				}
			}
		case <-drain.C:
			return
		}
	}
}

// end stops the readers and the live feed and closes the process, then
// waits, bounded, for the readers to return and a stop to be done.
func (s *supervisor) end() {
	close(s.quit)
	s.feed.close()
	_ = s.proc.Close()
	select {
	case <-s.readersDone:
	case <-time.After(5 * time.Second):
	}
	s.feed.reportDropped(5 * time.Second)
	if s.v.stop != stopNone {
		select {
		case <-s.stopped:
		case <-time.After(s.lim.KillGrace + 5*time.Second):
		}
	}
}

// terminate stops the process group: sig (SIGTERM, or SIGINT to steer),
// then SIGKILL after grace unless the process exited first.
func terminate(proc sandbox.Process, sig syscall.Signal, grace time.Duration, exitCh chan exitResult) {
	_ = proc.Signal(sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case r := <-exitCh:
		exitCh <- r
		return
	case <-timer.C:
	}
	_ = proc.Signal(syscall.SIGKILL)
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}

// oversizedWarning is the warning for a dropped output line.
var oversizedWarning = fmt.Sprintf("dropped an output line longer than %d MiB", MaxLineBytes>>20)

// readLines splits r into bounded lines and sends them; a line longer than
// MaxLineBytes is reported as oversized, never buffered.
func readLines(r io.Reader, stderr bool, out chan<- line, quit <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	if r == nil {
		return
	}
	lr := lines.NewReader(r, MaxLineBytes)
	for {
		b, over, err := lr.Next()
		if err != nil {
			return
		}
		l := line{stderr: stderr, oversized: over}
		if !over {
			l.data = append([]byte(nil), b...)
		}
		select {
		case out <- l:
		case <-quit:
			return
		}
	}
}
