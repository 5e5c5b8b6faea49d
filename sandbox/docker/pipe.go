package docker

import (
	"bytes"
	"io"
	"sync"
)

// pipeBuffer is how much unread output a process stream holds before the
// demultiplexer blocks. A caller that reads stdout to the end before touching
// stderr (or the reverse) does not deadlock unless the other stream produces
// more than this.
const pipeBuffer = 4 << 20

// bufPipe is an in-memory pipe with a bounded buffer: writes block only when
// the buffer is full, reads block until data, EOF (CloseWrite) or Close.
type bufPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	wdone  bool // writer finished: readers get EOF after the buffer drains
	closed bool // reader side closed: buffered data dropped, writes fail
}

func newBufPipe() *bufPipe {
	p := &bufPipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Read implements io.Reader.
func (p *bufPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.wdone && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return 0, io.EOF
	}
	if p.buf.Len() == 0 {
		return 0, io.EOF
	}
	n, _ := p.buf.Read(b)
	p.cond.Broadcast()
	return n, nil
}

// Write implements io.Writer; it blocks while the buffer is full.
func (p *bufPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for p.buf.Len() >= pipeBuffer && !p.closed {
			p.cond.Wait()
		}
		if p.closed || p.wdone {
			return n, io.ErrClosedPipe
		}
		k := min(len(b), pipeBuffer-p.buf.Len())
		p.buf.Write(b[:k])
		b = b[k:]
		n += k
		p.cond.Broadcast()
	}
	return n, nil
}

// CloseWrite marks the end of the stream.
func (p *bufPipe) CloseWrite() {
	p.mu.Lock()
	p.wdone = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close discards buffered data and unblocks readers and writers.
func (p *bufPipe) Close() {
	p.mu.Lock()
	p.closed = true
	p.buf.Reset()
	p.cond.Broadcast()
	p.mu.Unlock()
}
