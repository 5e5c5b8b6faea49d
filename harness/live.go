package harness

import (
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
)

// liveFeed runs the stdin side of a live-input turn: the session's protocol
// replies and the caller's messages, in order, through a pump that never
// blocks the supervision loop. All methods but the pump's goroutine run on
// supervise's goroutine; a nil feed does nothing.
type liveFeed struct {
	session adapters.LiveSession
	src     <-chan string
	col     *collector
	pump    *stdinPump
	waiting []string // caller messages not yet deliverable
	queued  liveQueue
	closed  bool
	late    int // caller messages that arrived after the turn ended
}

// Live input queues hold at most this many messages, or bytes, that the
// CLI has not taken yet; while one is full the harness takes no further
// message from Turn.Live, so the caller's sends block.
const (
	MaxLiveQueue      = 1024
	MaxLiveQueueBytes = 64 << 20
)

// liveQueue counts the messages of a queue against the bounds.
type liveQueue struct{ n, bytes int }

func (q *liveQueue) add(m string)  { q.n++; q.bytes += len(m) }
func (q *liveQueue) take(m string) { q.n--; q.bytes -= len(m) }
func (q liveQueue) full() bool     { return q.n >= MaxLiveQueue || q.bytes >= MaxLiveQueueBytes }

// full reports whether the feed takes no message now: the messages that
// wait, in the feed and in the stdin writer's hands (not yet written), are
// counted against the bounds together.
func (f *liveFeed) full() bool {
	if f == nil {
		return false
	}
	q := f.pump.held()
	q.n += f.queued.n
	q.bytes += f.queued.bytes
	return q.full()
}

// room fires when the stdin writer has written messages, so a full feed
// may take more; nil without a feed.
func (f *liveFeed) room() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.pump.room
}

func newLiveFeed(s adapters.LiveSession, stdin io.WriteCloser, src <-chan string, col *collector) *liveFeed {
	f := &liveFeed{session: s, src: src, col: col, pump: newStdinPump(stdin)}
	f.afterLine() // the opening messages may already be pending
	return f
}

// messages is the caller's channel, or nil without a feed.
func (f *liveFeed) messages() <-chan string {
	if f == nil {
		return nil
	}
	return f.src
}

// add queues one caller message and delivers what it can; messages that
// arrive after the turn ended are counted and reported together on close.
func (f *liveFeed) add(m string) {
	if f.closed {
		f.late++ // reported once, when supervision ends: a sender may keep sending
		return
	}
	f.waiting = append(f.waiting, m)
	f.queued.add(m)
	f.flush()
}

// afterLine runs after each decoded stdout line: protocol replies first,
// then waiting messages, then stdin is closed once the turn is done.
func (f *liveFeed) afterLine() {
	if f == nil || f.closed {
		return
	}
	if b := f.session.Pending(); len(b) > 0 {
		f.pump.write(b)
	}
	f.flush()
	if f.session.Done() {
		f.finish()
	}
}

func (f *liveFeed) flush() {
	for len(f.waiting) > 0 && !f.closed && f.session.Ready() && f.pump.backlog() < MaxLiveQueue {
		m := f.waiting[0]
		f.waiting = f.waiting[1:]
		f.queued.take(m)
		b, err := f.session.EncodeInput(m)
		if err != nil {
			f.col.warn("live input not delivered: " + err.Error())
			continue
		}
		f.pump.writeMessage(b, len(m))
		f.col.emit(adapters.Event{Kind: adapters.KindInput, Text: m})
	}
}

// finish closes stdin (after every queued write) and reports the messages
// that could not be delivered, including those still in the channel.
func (f *liveFeed) finish() {
	if f.closed {
		return
	}
	f.closed = true
	f.pump.close()
	n := len(f.waiting)
	f.waiting = nil
	for i := 0; i < MaxLiveQueue; i++ { // a sender that never stops is not waited out
		select {
		case _, ok := <-f.src:
			if ok {
				n++
				continue
			}
		default:
		}
		break
	}
	if n > 0 {
		f.col.warn(strconv.Itoa(n) + " live input message(s) not delivered: the turn had ended")
	}
}

// close ends the feed when supervision ends.
func (f *liveFeed) close() {
	if f == nil {
		return
	}
	f.finish()
	if f.late > 0 {
		f.col.warn(strconv.Itoa(f.late) + " live input message(s) not delivered: the turn had ended")
		f.late = 0
	}
}

// reportDropped runs once the process is closed: it waits, bounded, for
// the stdin writer to return and reports the messages it could not write
// (the CLI stopped reading or exited first).
func (f *liveFeed) reportDropped(wait time.Duration) {
	if f == nil {
		return
	}
	select {
	case <-f.pump.done:
	case <-time.After(wait):
	}
	f.pump.mu.Lock()
	n := f.pump.dropped + f.pump.unwritten.n
	f.pump.mu.Unlock()
	if n > 0 {
		f.col.warn(strconv.Itoa(n) + " live input message(s) not delivered: the CLI did not read them")
	}
}

// stdinPump writes to a process's stdin from its own goroutine, so a CLI
// that stops reading never blocks the supervision loop; Process.Close
// unblocks a stuck write.
type stdinPump struct {
	mu        sync.Mutex
	queue     []pumpWrite
	closing   bool
	unwritten liveQueue // caller messages queued or being written
	dropped   int       // caller messages whose write failed or was skipped
	wake      chan struct{}
	room      chan struct{} // a caller message was written (or dropped)
	done      chan struct{} // run returned
}

// pumpWrite is one write; size > 0 marks a caller message of that size.
type pumpWrite struct {
	b    []byte
	size int
	msg  bool
}

func newStdinPump(w io.WriteCloser) *stdinPump {
	p := &stdinPump{wake: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	go p.run(w)
	return p
}

func (p *stdinPump) write(b []byte) {
	p.mu.Lock()
	p.queue = append(p.queue, pumpWrite{b: b})
	p.mu.Unlock()
	p.signal()
}

// writeMessage queues a caller message of size bytes, encoded as b; it
// counts against the live queue bounds until written.
func (p *stdinPump) writeMessage(b []byte, size int) {
	p.mu.Lock()
	p.queue = append(p.queue, pumpWrite{b: b, size: size, msg: true})
	p.unwritten.n++
	p.unwritten.bytes += size
	p.mu.Unlock()
	p.signal()
}

// held is what the caller's messages not yet written amount to.
func (p *stdinPump) held() liveQueue {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unwritten
}

// backlog is how many writes wait for the CLI to read them.
func (p *stdinPump) backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

func (p *stdinPump) close() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.signal()
}

func (p *stdinPump) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *stdinPump) run(w io.WriteCloser) {
	defer close(p.done)
	failed := w == nil
	for range p.wake {
		for {
			p.mu.Lock()
			q, closing := p.queue, p.closing
			p.queue = nil
			p.mu.Unlock()
			for _, b := range q {
				if !failed {
					if _, err := w.Write(b.b); err != nil {
						failed = true // the CLI stopped reading: drop later writes, still close stdin at the end
					}
				}
				if b.msg {
					p.mu.Lock()
					p.unwritten.n--
					p.unwritten.bytes -= b.size
					if failed {
						p.dropped++
					}
					p.mu.Unlock()
					select {
					case p.room <- struct{}{}:
					default:
					}
				}
			}
			if len(q) > 0 {
				continue
			}
			if closing {
				if w != nil {
					_ = w.Close()
				}
				return
			}
			break
		}
	}
}
