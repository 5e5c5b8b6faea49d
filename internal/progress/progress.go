// Package progress draws one live status line: redrawn in place on a
// terminal, throttled to one draw per interval, with elapsed time and an
// estimate of the time left; printed as a plain line at most once per
// interval elsewhere (a CI log). Log lines print above the status line
// without tearing it. Bootstrap downloads and batch runs share it.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is how often the line is redrawn.
const DefaultInterval = 200 * time.Millisecond

// Line is a live status line. Its methods are safe for concurrent use.
type Line struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	every    time.Duration
	now      func() time.Time
	start    time.Time
	text     string
	done     int
	total    int
	dirty    bool
	shown    bool // a status line is on the terminal now
	lastSent string
	stop     chan struct{}
	stopped  chan struct{}
	closed   bool
}

// New starts a line on w. tty draws in place; every (0: DefaultInterval)
// bounds how often anything is drawn.
func New(w io.Writer, tty bool, every time.Duration) *Line {
	if every <= 0 {
		every = DefaultInterval
	}
	l := &Line{w: w, tty: tty, every: every, now: time.Now, stop: make(chan struct{}), stopped: make(chan struct{})}
	l.start = l.now()
	go l.loop()
	return l
}

func (l *Line) loop() {
	defer close(l.stopped)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.mu.Lock()
			l.drawLocked()
			l.mu.Unlock()
		case <-l.stop:
			return
		}
	}
}

// Set replaces the status: done of total units (total 0: no count, no
// estimate) and a text. The count never goes back: an update with fewer
// done than one already set is stale and dropped whole, so snapshots that
// race each other cannot make the line count backwards.
func (l *Line) Set(text string, done, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if total == l.total && done < l.done {
		return
	}
	l.text, l.done, l.total, l.dirty = text, done, total, true
}

// Logf prints one line above the status line, at once.
func (l *Line) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	fmt.Fprintf(l.w, format, args...)
	if !strings.HasSuffix(format, "\n") {
		fmt.Fprintln(l.w)
	}
	if l.tty && l.lastSent != "" {
		l.dirty = true // redraw at the next tick
	}
}

// Close draws the final status as a plain line and stops. Idempotent.
func (l *Line) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.stop)
	l.clearLocked()
	if l.text != "" {
		fmt.Fprintln(l.w, l.render())
	}
	l.mu.Unlock()
	<-l.stopped
}

// drawLocked draws the status if it changed since the last draw.
func (l *Line) drawLocked() {
	if !l.dirty || l.closed || l.text == "" {
		return
	}
	l.dirty = false
	s := l.render()
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K%s", s)
		l.shown = true
	} else if s != l.lastSent {
		fmt.Fprintln(l.w, s)
	}
	l.lastSent = s
}

// clearLocked removes a status line drawn on the terminal.
func (l *Line) clearLocked() {
	if l.tty && l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

// render is the status with its count, elapsed time and estimate.
func (l *Line) render() string {
	elapsed := l.now().Sub(l.start)
	s := l.text
	if l.total > 0 {
		s = fmt.Sprintf("%d/%d %s", l.done, l.total, l.text)
	}
	s += "  " + round(elapsed)
	if l.total > 0 && l.done > 0 && l.done < l.total {
		left := time.Duration(float64(elapsed) / float64(l.done) * float64(l.total-l.done))
		s += ", ~" + round(left) + " left"
	}
	return s
}

func round(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
