package leasekit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// PipeBuffer is how much unread output a [Pipe] holds before its writer
// blocks. A caller that reads stdout to the end before touching stderr (or
// the reverse) does not deadlock unless the other stream produces more.
const PipeBuffer = 4 << 20

// Pipe is an in-memory pipe with a bounded buffer: writes block only when
// the buffer is full, reads block until data, EOF (CloseWrite) or Close.
type Pipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	wdone  bool // writer finished: readers get EOF after the buffer drains
	closed bool // reader side closed: buffered data dropped, writes fail
}

// NewPipe returns an empty pipe.
func NewPipe() *Pipe {
	p := &Pipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Read implements io.Reader.
func (p *Pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.wdone && !p.closed {
		p.cond.Wait()
	}
	if p.closed || p.buf.Len() == 0 {
		return 0, io.EOF
	}
	n, _ := p.buf.Read(b)
	p.cond.Broadcast()
	return n, nil
}

// Write implements io.Writer; it blocks while the buffer is full.
func (p *Pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for p.buf.Len() >= PipeBuffer && !p.closed {
			p.cond.Wait()
		}
		if p.closed || p.wdone {
			return n, io.ErrClosedPipe
		}
		k := min(len(b), PipeBuffer-p.buf.Len())
		p.buf.Write(b[:k])
		b = b[k:]
		n += k
		p.cond.Broadcast()
	}
	return n, nil
}

// CloseWrite marks the end of the stream.
func (p *Pipe) CloseWrite() {
	p.mu.Lock()
	p.wdone = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close discards buffered data and unblocks readers and writers.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.closed = true
	p.buf.Reset()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// TailBuffer keeps the last Max bytes written to it.
type TailBuffer struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

// Write implements io.Writer.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (t *TailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// TailOf copies r (a process's stderr) into a TailBuffer of its last max
// bytes, in the background until r ends, and returns the buffer and a
// channel closed at that end, for AwaitOutput.
func TailOf(r io.Reader, maxBytes int) (*TailBuffer, <-chan struct{}) {
	t := &TailBuffer{Max: maxBytes}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(t, r)
	}()
	return t, done
}

// OutputGrace bounds the wait for a process's output to finish after the
// process itself has ended.
const OutputGrace = 5 * time.Second

// AwaitOutput waits until done is closed (a goroutine copying a finished
// process's stderr reached its end), at most OutputGrace: a stream that a
// cancelled exec left open must not hang the caller, who only wants the
// message it holds.
func AwaitOutput(done <-chan struct{}) {
	t := time.NewTimer(OutputGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// ReleaseAll releases every lease of ls concurrently and joins the errors:
// what a provider's ReleaseAll does with the leases it still holds.
func ReleaseAll[L interface{ Release(context.Context) error }](ctx context.Context, ls []L) error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ReleaseAllWithin runs releaseAll (a provider's ReleaseAll) with ctx's
// values but never its cancellation, bounded by timeout: how a kind's
// engine removes what a run still holds when it closes, also after a
// signal cancelled the run.
func ReleaseAllWithin(ctx context.Context, releaseAll func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return releaseAll(ctx)
}
