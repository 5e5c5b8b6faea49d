package leasekit

import (
	"bytes"
	"io"
	"sync"
)

// Markers passes a command's output stream on to W and takes out the
// markers a lease's wrapper writes into it: Prefix (which holds the
// wrapper's random nonce, so the command cannot write one by chance), a
// payload of at most Max bytes, and End. A marker split across writes is
// put together: bytes that may begin one are held back until they are
// known, and Flush sends them on when the stream ended without it.
//
// Take is given each payload and says whether it is the wrapper's (ok;
// else the bytes are output like any other) and whether it was the
// stream's last marker: after that the rest of the stream passes on
// unread, or is dropped with DropAfter (a stream whose writer Take
// closed). Take runs after everything before its marker was written to W.
//
// A Write always takes all of its bytes: once W refuses one, the output
// that follows is dropped, and the markers are still read.
type Markers struct {
	W         io.Writer
	Prefix    []byte
	End       byte
	Max       int
	Take      func(payload string) (ok, last bool)
	DropAfter bool

	// mu orders Write and Flush: a stream's copy goroutine may still write
	// after its caller flushed a cancelled stream.
	mu     sync.Mutex
	held   []byte
	done   bool
	failed bool
}

// Write passes b on, without the markers in it.
func (m *Markers) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data := b
	if len(m.held) > 0 {
		data = append(m.held, b...)
		m.held = nil
	}
	for !m.done {
		i := bytes.Index(data, m.Prefix)
		if i < 0 {
			k := heldTail(data, m.Prefix)
			m.emit(data[:len(data)-k])
			if k > 0 {
				m.held = bytes.Clone(data[len(data)-k:])
			}
			return len(b), nil
		}
		m.emit(data[:i])
		data = data[i:]
		rest := data[len(m.Prefix):]
		end := bytes.IndexByte(rest[:min(len(rest), m.Max+1)], m.End)
		if end < 0 && len(rest) <= m.Max {
			// Possibly a marker still arriving.
			m.held = bytes.Clone(data)
			return len(b), nil
		}
		if end >= 0 {
			if ok, last := m.Take(string(rest[:end])); ok {
				data, m.done = rest[end+1:], last
				continue
			}
		}
		// Not a marker of the wrapper's: its first byte is output, and the
		// search goes on after it.
		m.emit(data[:1])
		data = data[1:]
	}
	if !m.DropAfter {
		m.emit(data)
	}
	return len(b), nil
}

// Flush sends on what was held back as a marker's possible start; call it
// when the stream ended.
func (m *Markers) Flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emit(m.held)
	m.held = nil
}

func (m *Markers) emit(b []byte) {
	if len(b) == 0 || m.failed {
		return
	}
	if _, err := m.W.Write(b); err != nil {
		m.failed = true
	}
}

// heldTail returns the length of the longest end of data that is a proper
// beginning of prefix.
func heldTail(data, prefix []byte) int {
	for i := max(0, len(data)-len(prefix)+1); i < len(data); i++ {
		j := bytes.IndexByte(data[i:], prefix[0])
		if j < 0 {
			return 0
		}
		i += j
		if bytes.HasPrefix(prefix, data[i:]) {
			return len(data) - i
		}
	}
	return 0
}
