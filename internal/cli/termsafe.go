package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// termSafe returns s with everything that could steer a terminal shown
// instead of acted on, for text of an agent's (or anyone's but Outpost's)
// that a human-mode command prints: C0 controls but newline and tab (ESC,
// so no CSI or OSC sequence; BEL, backspace, a carriage return that would
// rewrite the line), DEL and C1 controls (U+0080–U+009F: the 8-bit CSI and
// OSC) become Go escapes ("\x1b", "\u009b"), as do the bidirectional
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) that
// reorder what is shown; bytes that are not UTF-8 become U+FFFD. A carriage
// return right before a newline is dropped (Windows line ends). Outpost's
// own escape sequences (the batch status line) are written elsewhere;
// --json output is never passed through here.
func termSafe(s string) string {
	if !needsTermSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports a C1 control or a bidirectional formatting character.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// needsTermSafe is the fast path: plain printable ASCII and valid UTF-8
// without the runes above need no copy.
func needsTermSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return true
		}
		if c >= 0x80 {
			for _, r := range s[i:] {
				if r == utf8.RuneError || unsafeRune(r) || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
					return true
				}
			}
			return false
		}
	}
	return false
}
