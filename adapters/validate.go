package adapters

import (
	"net/url"
	"strings"
	"unicode"
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
	_, hidden := Invisible(m)
	return !hidden
}

// Invisible returns the first character of s that prints as nothing or
// reorders what follows — a format character (Unicode category Cf: the
// bidirectional embeddings, overrides and isolates U+202A–U+202E and
// U+2066–U+2069, the marks U+200E and U+200F, zero-width spaces and
// joiners, U+FEFF) or a line or paragraph separator (U+2028, U+2029) —
// and true; ids and names holding one would print as something they are
// not.
func Invisible(s string) (rune, bool) {
	for _, r := range s {
		if unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Bidi_Control, r) {
			return r, true
		}
	}
	return 0, false
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

// ClientBaseURL is [V1BaseURL] for the adapter of agent: an invalid base
// URL is that agent's configuration error.
func ClientBaseURL(agent, base string) (string, error) {
	out, ok := V1BaseURL(base)
	if !ok {
		return "", ConfigError(agent, "invalid endpoint base URL %q", base)
	}
	return out, nil
}

// CheckSecret refuses, as agent's configuration error, an endpoint that
// carries both an API key and an OAuth token: a CLI sends one or the other.
func (e *Endpoint) CheckSecret(agent string) error {
	if e.APIKey != "" && e.OAuthToken != "" {
		return ConfigError(agent, "endpoint has both an API key and an OAuth token; choose one")
	}
	return nil
}

// ClientEndpoint checks ep for the OpenAI-style client of agent and returns
// the base URL the client is given ([ClientBaseURL]); ep may carry one
// secret at most ([Endpoint.CheckSecret]).
func ClientEndpoint(agent string, ep *Endpoint) (string, error) {
	base, err := ClientBaseURL(agent, ep.BaseURL)
	if err != nil {
		return "", err
	}
	return base, ep.CheckSecret(agent)
}
