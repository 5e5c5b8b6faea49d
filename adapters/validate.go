package adapters

import (
	"net/url"
	"strings"
)

// MaxIDLen bounds conversation ids passed to a CLI.
const MaxIDLen = 128

// ValidID reports whether id may be passed to a CLI as a conversation id
// (--resume, --conversation, exec resume): 1 to MaxIDLen letters, digits, '-'
// or '_', not starting with '-', so an id can never be read as a flag.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ValidModel reports whether m may be passed as a model name: at most 200
// bytes, no whitespace or control characters, not starting with '-'.
func ValidModel(m string) bool {
	if m == "" || len(m) > 200 || m[0] == '-' {
		return false
	}
	for _, r := range m {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// V1BaseURL returns the base URL an OpenAI-style client (which appends
// "/responses" or "/chat/completions") is given for an endpoint base URL:
// "/v1" is appended when the URL has no path. ok is false for anything but
// an absolute http or https URL without a query or fragment.
func V1BaseURL(base string) (string, bool) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	out := strings.TrimRight(base, "/")
	if strings.Trim(u.Path, "/") == "" {
		out += "/v1"
	}
	return out, true
}
