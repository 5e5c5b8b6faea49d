package conversation

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/outpost-dev/outpost/outposterr"
)

// A sealed archive is a stream of XChaCha20-Poly1305 chunks, so it is
// written and read in bounded memory:
//
//	magic (8 bytes) | nonce prefix (16 bytes) | chunk | chunk | ... | last chunk
//
// Every chunk but the last holds sealChunk bytes of plaintext; the last
// holds fewer (possibly none). A chunk's nonce is the prefix, its index
// (7 bytes, big-endian) and a last-chunk flag (1 byte), so chunks cannot be
// reordered, dropped or cut at the end. Every chunk is authenticated with
// the manifest's bound fields as associated data (see [Manifest]), so a
// manifest edited or swapped for another does not open the archive.
const (
	sealMagic  = "OPSEAL01"
	sealChunk  = 64 << 10
	sealPrefix = 16
)

var errTruncated = errors.New("sealed archive is truncated")

func newAEAD(key []byte) (cipher.AEAD, error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "conversation key")
	}
	return aead, nil
}

func chunkNonce(prefix []byte, index uint64, last bool) []byte {
	n := make([]byte, chacha20poly1305.NonceSizeX)
	copy(n, prefix)
	var idx [8]byte
	binary.BigEndian.PutUint64(idx[:], index)
	copy(n[sealPrefix:sealPrefix+7], idx[1:])
	if last {
		n[sealPrefix+7] = 1
	}
	return n
}

// sealWriter seals what is written to it onto w; Close writes the last
// chunk (it does not close w).
type sealWriter struct {
	w      io.Writer
	aead   cipher.AEAD
	ad     []byte
	prefix []byte
	index  uint64
	buf    []byte
	out    []byte
	err    error
}

func newSealWriter(w io.Writer, key, ad []byte) (*sealWriter, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	prefix := make([]byte, sealPrefix)
	if _, err := rand.Read(prefix); err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "nonce")
	}
	if _, err := w.Write(append([]byte(sealMagic), prefix...)); err != nil {
		return nil, err
	}
	return &sealWriter{w: w, aead: aead, ad: ad, prefix: prefix,
		buf: make([]byte, 0, sealChunk), out: make([]byte, 0, sealChunk+aead.Overhead())}, nil
}

func (s *sealWriter) flush(last bool) error {
	if s.index >= 1<<56 {
		return errors.New("sealed archive too long")
	}
	s.out = s.aead.Seal(s.out[:0], chunkNonce(s.prefix, s.index, last), s.buf, s.ad)
	s.index++
	s.buf = s.buf[:0]
	_, err := s.w.Write(s.out)
	return err
}

func (s *sealWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for len(p) > 0 {
		if len(s.buf) == sealChunk {
			// A full chunk is written only once more data follows: the
			// last chunk is always shorter than sealChunk.
			if s.err = s.flush(false); s.err != nil {
				return n, s.err
			}
		}
		k := copy(s.buf[len(s.buf):sealChunk], p)
		s.buf = s.buf[:len(s.buf)+k]
		p, n = p[k:], n+k
	}
	return n, nil
}

func (s *sealWriter) Close() error {
	if s.err != nil {
		return s.err
	}
	if len(s.buf) == sealChunk {
		if s.err = s.flush(false); s.err != nil {
			return s.err
		}
	}
	s.err = s.flush(true)
	if s.err == nil {
		s.err = errors.New("sealed archive already closed")
		return nil
	}
	return s.err
}

// openReader opens a sealed stream chunk by chunk. A chunk that does not
// authenticate, a missing last chunk and data after it are errors; nothing
// of a chunk is returned before it authenticates.
type openReader struct {
	r      io.Reader
	aead   cipher.AEAD
	ad     []byte
	prefix []byte
	index  uint64
	in     []byte // one sealed chunk and the first byte of the next
	have   int    // bytes of in already read
	plain  []byte
	pos    int
	done   bool
	err    error
}

// errOpen is returned for a chunk that does not authenticate.
var errOpen = errors.New("cannot open the archive (wrong key, tampered, or its manifest was changed)")

func newOpenReader(r io.Reader, key, ad []byte) (*openReader, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	head := make([]byte, len(sealMagic)+sealPrefix)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, errTruncated
	}
	if string(head[:len(sealMagic)]) != sealMagic {
		return nil, errors.New("not a sealed archive")
	}
	return &openReader{r: r, aead: aead, ad: ad, prefix: head[len(sealMagic):],
		in: make([]byte, sealChunk+aead.Overhead()+1)}, nil
}

// next opens the next chunk into plain.
func (o *openReader) next() error {
	n, err := io.ReadFull(o.r, o.in[o.have:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return err
	}
	total := o.have + n
	full := sealChunk + o.aead.Overhead()
	last := total <= full
	if !last {
		total = full
	}
	if total < o.aead.Overhead() {
		return errTruncated
	}
	plain, oerr := o.aead.Open(o.plain[:0], chunkNonce(o.prefix, o.index, last), o.in[:total], o.ad)
	if oerr != nil {
		if last && total == full {
			return errTruncated // a full chunk with nothing after it: the last one was cut
		}
		return errOpen
	}
	o.index++
	o.plain, o.pos, o.done = plain, 0, last
	if last {
		o.have = 0
	} else {
		o.in[0] = o.in[full]
		o.have = 1
	}
	return nil
}

func (o *openReader) Read(p []byte) (int, error) {
	for o.pos == len(o.plain) {
		if o.err != nil {
			return 0, o.err
		}
		if o.done {
			o.err = io.EOF
			return 0, io.EOF
		}
		if o.err = o.next(); o.err != nil {
			return 0, o.err
		}
	}
	n := copy(p, o.plain[o.pos:])
	o.pos += n
	return n, nil
}
