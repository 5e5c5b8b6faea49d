package bootstrap

import (
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// Integrity is a SHA-512 digest.
type Integrity [sha512.Size]byte

// ParseIntegrity reads a SHA-512 pin: an SRI string "sha512-<base64>" (the
// form of npm's dist.integrity; when several space-separated hashes are
// given, the first sha512 one is used) or 128 hexadecimal digits (the output
// of sha512sum), optionally prefixed with "sha512:".
func ParseIntegrity(s string) (Integrity, error) {
	var d Integrity
	s = strings.TrimSpace(s)
	if s == "" {
		return d, fmt.Errorf("empty sha512 digest")
	}
	for field := range strings.FieldsSeq(s) {
		b64, ok := strings.CutPrefix(field, "sha512-")
		if !ok {
			continue
		}
		if i := strings.IndexByte(b64, '?'); i >= 0 { // SRI options
			b64 = b64[:i]
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != len(d) {
			return d, fmt.Errorf("invalid sha512 integrity %q", field)
		}
		copy(d[:], raw)
		return d, nil
	}
	h := strings.TrimPrefix(s, "sha512:")
	if len(h) == 2*len(d) {
		if raw, err := hex.DecodeString(h); err == nil {
			copy(d[:], raw)
			return d, nil
		}
	}
	return d, fmt.Errorf("invalid sha512 digest %q: want sha512-<base64> or 128 hex digits", s)
}

// String is the SRI form, "sha512-<base64>".
func (d Integrity) String() string { return "sha512-" + base64.StdEncoding.EncodeToString(d[:]) }

// Equal compares in constant time.
func (d Integrity) Equal(o Integrity) bool { return subtle.ConstantTimeCompare(d[:], o[:]) == 1 }

// newHash returns the hash whose sum is an [Integrity].
func newHash() hash.Hash { return sha512.New() }

func sumOf(h hash.Hash) Integrity {
	var d Integrity
	copy(d[:], h.Sum(nil))
	return d
}
