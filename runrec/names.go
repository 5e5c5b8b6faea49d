package runrec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// MaxIDBytes bounds a job id.
const MaxIDBytes = 4096

// maxNameBytes bounds an encoded name; a longer one is cut and given a hash
// of the whole id.
const maxNameBytes = 96

// SafeName encodes a job id as one path component: ASCII letters, digits,
// '-', '_' and '.' are kept (a leading '.' is not), every other byte becomes
// %XX, so '/', '#', '%', control characters and non-ASCII bytes can never
// form a path, a hidden file, "." or "..". An encoding longer than 96 bytes
// keeps its first 80 bytes and ends with '~' and 12 hex digits of the id's
// SHA-256. An empty or oversized id is a configuration error.
func SafeName(id string) (string, error) {
	if id == "" {
		return "", outposterr.New(outposterr.Configuration, "empty job id")
	}
	if len(id) > MaxIDBytes {
		return "", outposterr.New(outposterr.Configuration, "job id longer than %d bytes", MaxIDBytes)
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		keep := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '.' && i > 0)
		if keep {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	name := b.String()
	if len(name) > maxNameBytes {
		cut := 80
		// Never cut inside a %XX escape.
		if i := strings.LastIndexByte(name[:cut], '%'); i >= cut-2 {
			cut = i
		}
		name = name[:cut] + "~" + idHash(id)
	}
	return name, nil
}

// idHash is 12 hex digits of the id's SHA-256 ('~' never occurs in an
// encoded id, so a suffixed name cannot equal another id's encoding).
func idHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}
