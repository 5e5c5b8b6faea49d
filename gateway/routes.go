package gateway

import (
	"net/http"
	"net/url"
	"strings"
)

// API names a wire API the gateway understands.
type API string

// The wire APIs.
const (
	// APIAnthropic is the Anthropic Messages API (Claude Code; Copilot BYOK
	// with provider type anthropic).
	APIAnthropic API = "anthropic"
	// APIResponses is the OpenAI Responses API (Codex CLI).
	APIResponses API = "responses"
	// APIChat is the OpenAI Chat Completions API (Copilot CLI BYOK).
	APIChat API = "chat"
)

// route is one allowed request: a method and a path pattern, the API that
// serves it, and whether its responses carry token usage.
type route struct {
	method string
	// path is matched exactly; a trailing "{id}" segment matches one
	// identifier segment (letters, digits, '.', '-', '_', ':').
	path  string
	api   API
	model bool // a model call: its successful responses must carry usage
}

// routes is the allowlist of paths a lease may reach, relative to the grant's
// upstream. Everything else is answered 404 by the gateway itself, so a
// placeholder never buys access to other endpoints of the upstream (files,
// batches, administration) with the real credential.
var routes = []route{
	{http.MethodPost, "/v1/messages", APIAnthropic, true},
	{http.MethodPost, "/v1/messages/count_tokens", APIAnthropic, false},
	{http.MethodGet, "/v1/models", APIAnthropic, false},
	{http.MethodGet, "/v1/models/{id}", APIAnthropic, false},
	{http.MethodHead, "/api/hello", APIAnthropic, false},
	{http.MethodGet, "/api/hello", APIAnthropic, false},
	{http.MethodPost, "/v1/responses", APIResponses, true},
	{http.MethodPost, "/v1/chat/completions", APIChat, true},
	{http.MethodPost, "/chat/completions", APIChat, true},
	{http.MethodGet, "/models", APIChat, false},
}

// match finds the route of a request. It accepts only clean paths: no
// escaped slashes or dots, no "." or ".." segments, no empty segments, no
// absolute request targets pointing elsewhere.
func match(method string, u *url.URL) (route, bool) {
	if u.RawPath != "" || u.Opaque != "" || u.Host != "" {
		return route{}, false
	}
	p := u.Path
	if !cleanPath(p) {
		return route{}, false
	}
	for _, r := range routes {
		if r.method != method {
			continue
		}
		if prefix, ok := strings.CutSuffix(r.path, "{id}"); ok {
			if id, ok := strings.CutPrefix(p, prefix); ok && validID(id) {
				return r, true
			}
			continue
		}
		if p == r.path {
			return r, true
		}
	}
	return route{}, false
}

// guessAPI picks the error body shape for a request that matched no route.
func guessAPI(p string) API {
	switch {
	case strings.Contains(p, "/responses"):
		return APIResponses
	case strings.Contains(p, "/chat/") || p == "/models":
		return APIChat
	default:
		return APIAnthropic
	}
}

func cleanPath(p string) bool {
	if p == "" || p[0] != '/' || len(p) > 256 {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < 0x21 || c > 0x7e || c == '%' || c == '\\' {
			return false
		}
	}
	return true
}

func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_', c == ':':
		default:
			return false
		}
	}
	return s != "." && s != ".."
}
