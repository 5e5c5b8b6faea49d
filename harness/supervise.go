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
	lim := t.Limits
	v := verdict{deadline: lim.Deadline, idle: lim.IdleTimeout}
	// A few lines in flight: each may be up to MaxLineBytes.
	lineCh := make(chan line, 16)
	quit := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(2)
	go readLines(proc.Stdout(), false, lineCh, quit, &readers)
	go readLines(proc.Stderr(), true, lineCh, quit, &readers)
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()

	exitCh := make(chan exitResult, 1)
	go func() {
		st, err := proc.Wait()
		exitCh <- exitResult{st, err}
	}()

	idle := time.NewTimer(lim.IdleTimeout)
	defer idle.Stop()
	var settle <-chan time.Time
	var killWait <-chan time.Time
	var stopOnce sync.Once
	stopped := make(chan struct{})
	stop := func(r stopReason, cause error) {
		stopOnce.Do(func() {
			v.stop, v.cause = r, cause
			sig := syscall.SIGTERM
			if r == stopSteered {
				sig = syscall.SIGINT // what a person at the terminal would press
			}
			go func() {
				defer close(stopped)
				terminate(proc, sig, lim.KillGrace, exitCh)
			}()
		})
	}
	// steerNow interrupts the CLI for waiting messages once it can be
	// continued: it named its conversation and has not finished.
	steerNow := func() {
		if st.waiting() && col.res.Conversation != "" && col.finished == nil && v.stop == stopNone {
			st.interrupted = true
			stop(stopSteered, nil)
			killWait = time.After(lim.KillGrace + 10*time.Second)
		}
	}
	handle := func(l line) {
		if l.oversized {
			col.warn(oversizedWarning)
			return
		}
		if l.stderr {
			col.stderrLine(l.data)
		} else {
			hadFinished := col.finished != nil
			col.stdoutLine(l.data)
			if !hadFinished && col.finished != nil {
				settle = time.After(lim.Settle)
			}
			if t.StopOnQuotaRetry && col.quotaChatter != nil && col.finished == nil {
				stop(stopQuota, nil)
				killWait = time.After(lim.KillGrace + 10*time.Second)
			}
			if col.over != nil && col.finished == nil && v.stop == stopNone {
				stop(stopBudget, nil)
				killWait = time.After(lim.KillGrace + 10*time.Second)
			}
			feed.afterLine()
			steerNow()
		}
	}
	done := turnCtx.Done()
	var spent <-chan struct{} // the gateway refuses the turn's requests
	if br != nil && br.budget != nil {
		spent = br.grant.Refused()
	}
	messages := feed.messages()
	if st != nil {
		messages = st.src
	}

loop:
	for {
		// A full queue stops taking messages: the caller's sends block
		// (backpressure) until the CLI has taken some.
		in := messages
		if (st != nil && st.full()) || feed.full() {
			in = nil
		}
		select {
		case l := <-lineCh:
			handle(l)
			resetTimer(idle, lim.IdleTimeout)
		case <-spent:
			spent = nil
			if hit := br.over(); hit != nil && col.finished == nil && v.stop == stopNone {
				if col.over == nil {
					col.over = hit
				}
				stop(stopBudget, nil)
				killWait = time.After(lim.KillGrace + 10*time.Second)
			}
		case m, ok := <-in:
			if !ok {
				messages = nil
				continue
			}
			if st != nil {
				st.add(m)
				steerNow()
				continue
			}
			feed.add(m)
		case r := <-exitCh:
			v.exit, v.exited = r.st, r.err == nil
			if r.err != nil {
				col.warn("wait for CLI: " + r.err.Error())
			}
			exitCh <- r // terminate may be waiting on it too
			break loop
		case <-idle.C:
			stop(stopIdle, nil)
			killWait = time.After(lim.KillGrace + 10*time.Second)
		case <-settle:
			settle = nil
			stop(stopSettled, nil)
			killWait = time.After(lim.KillGrace + 10*time.Second)
		case <-done:
			done = nil
			if col.finishedOK() {
				stop(stopSettled, nil)
			} else {
				stop(contextStop(parent), context.Cause(turnCtx))
			}
			killWait = time.After(lim.KillGrace + 10*time.Second)
		case <-killWait:
			// The process did not report its exit even after SIGKILL.
			col.warn("CLI did not exit after SIGKILL; abandoning it")
			break loop
		}
	}

	// Drain: output already in flight is still collected for a short while.
	drain := time.NewTimer(lim.Drain)
	defer drain.Stop()
drainLoop:
	for {
		select {
		case l := <-lineCh:
			handle(l)
		case <-readersDone:
			// Both streams are closed; take what is still buffered.
			for {
				select {
				case l := <-lineCh:
					handle(l)
				default:
					break drainLoop
				}
			}
		case <-drain.C:
			break drainLoop
		}
	}
	close(quit)
	feed.close()
	_ = proc.Close()
	select {
	case <-readersDone:
	case <-time.After(5 * time.Second):
	}
	if v.stop != stopNone {
		select {
		case <-stopped:
		case <-time.After(lim.KillGrace + 5*time.Second):
		}
	}
	return v
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
