package copilot

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

var _ adapters.Authenticator = (*Adapter)(nil)

// Credential variables and files of Copilot CLI.
const (
	// TokenVar is the account token Copilot reads first.
	TokenVar = "COPILOT_GITHUB_TOKEN"
	// ConfigFile holds `copilot login` tokens when no keychain is used,
	// relative to the home directory (JSONC).
	ConfigFile = ".copilot/config.json"
	// HomeVar relocates ~/.copilot.
	HomeVar = "COPILOT_HOME"
)

// ambientTokens are the lower-precedence token variables Copilot would
// silently pick up (an Actions GITHUB_TOKEN is rejected by the service).
var ambientTokens = []string{"GH_TOKEN", "GITHUB_TOKEN"}

// Credentials plans Copilot CLI's authentication:
//   - account (default: the host login file): the token of the last
//     logged-in user in ~/.copilot/config.json (or $COPILOT_HOME/config.json),
//     authTokens["<host>:<login>"] (a string or {token}), delivered as
//     COPILOT_GITHUB_TOKEN — never as a file. Logins kept in the system
//     keychain (the CLI's default) are not readable: use account:variable.
//   - account:variable: COPILOT_GITHUB_TOKEN (a fine-grained PAT with the
//     "Copilot Requests" permission, or an OAuth token).
//   - usage: unsupported — Copilot has no API-key mode for GitHub-hosted
//     models; pay-per-use is BYOK through an Endpoint.
//
// Classic personal access tokens (ghp_) are refused: the service rejects
// them. GH_TOKEN and GITHUB_TOKEN are always stripped.
func (a *Adapter) Credentials(auth credentials.Auth, vars map[string]string) (credentials.Plan, error) {
	strip := append([]string(nil), ambientTokens...)
	switch auth.Form {
	case credentials.None:
		plan := credentials.Plan{Strip: append(strip, TokenVar)}
		// Bring your own provider: an OpenAI-compatible provider's key can
		// stay with a gateway (the CLI then gets the gateway as its provider).
		if key, ok := credentials.Var(vars, APIKeyVar); ok {
			if base, ok := credentials.Var(vars, BaseURLVar); ok {
				if t, _ := credentials.Var(vars, TypeVar); t == "" || t == "openai" {
					plan.Bridge = &credentials.Bridge{Var: APIKeyVar, Secret: key, Scheme: "bearer",
						Upstream: providerUpstream(base), Strip: []string{BaseURLVar, TypeVar}}
				}
			}
		}
		return plan, nil
	case credentials.Account:
		if auth.Source == credentials.SourceVariable {
			tok, ok := credentials.Var(vars, TokenVar)
			if !ok {
				return credentials.Plan{}, credentials.Missing(Name, TokenVar,
					"create a fine-grained personal access token with the \"Copilot Requests\" permission")
			}
			if err := checkToken(tok); err != nil {
				return credentials.Plan{}, err
			}
			return credentials.Plan{Env: map[string]string{TokenVar: tok}, Strip: strip}, nil
		}
		if _, ok := credentials.Var(vars, TokenVar); ok {
			return credentials.Plan{}, outposterr.New(outposterr.Configuration,
				"copilot: %s is set and takes precedence over the login file; choose account:variable or remove it", TokenVar)
		}
		return credentials.Plan{
			Strip: append(strip, TokenVar),
			Files: []credentials.HostFile{{
				Path: ConfigFile, RelocateVar: HomeVar, DestVar: TokenVar, Project: ProjectToken,
				Login:       "copilot login (with the token stored in the config file, not the keychain)",
				Alternative: "account:variable with " + TokenVar,
			}},
		}, nil
	case credentials.Usage:
		return credentials.Plan{}, outposterr.New(outposterr.Configuration,
			"copilot does not support usage authentication: GitHub-hosted models need an account token (account or account:variable); "+
				"for pay-per-use, point it at your own provider with an endpoint (BYOK)")
	}
	return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "account:file", "account:variable", "none")
}

// providerUpstream is the API base of a bring-your-own provider's
// COPILOT_PROVIDER_BASE_URL: the URL less trailing slashes and a final /v1
// (the gateway's routes carry the version).
func providerUpstream(base string) string {
	return strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
}

// Upstreams implements [adapters.Upstreamer]: the bring-your-own provider
// the project's COPILOT_PROVIDER_BASE_URL names, if any. (Copilot's own
// service is reached with a login installed in the lease, never bridged.)
func (a *Adapter) Upstreams(vars map[string]string) []string {
	if base, ok := credentials.Var(vars, BaseURLVar); ok {
		return []string{providerUpstream(base)}
	}
	return nil
}

// RelocationVars implements [adapters.Relocator].
func (a *Adapter) RelocationVars() []string { return []string{HomeVar} }

func checkToken(tok string) error {
	if strings.HasPrefix(tok, "ghp_") {
		return outposterr.New(outposterr.Configuration,
			"copilot: classic personal access tokens (ghp_) are not accepted by Copilot; "+
				"create a fine-grained token with the \"Copilot Requests\" permission")
	}
	return nil
}

// ProjectToken reduces ~/.copilot/config.json (JSONC: comments and trailing
// commas allowed) to the token of its lastLoggedInUser: the entry of
// authTokens whose key is "<host>:<login>" for that user, a string or an
// object with a token field. Nothing else of the file leaves the host.
func ProjectToken(content []byte) ([]byte, error) {
	var cfg struct {
		Last *struct {
			Host  string `json:"host"`
			Login string `json:"login"`
		} `json:"lastLoggedInUser"`
		Tokens map[string]json.RawMessage `json:"authTokens"`
	}
	if err := json.Unmarshal(StripJSONC(content), &cfg); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "copilot: %s is not valid JSON", ConfigFile)
	}
	if cfg.Last == nil || cfg.Last.Login == "" {
		return nil, outposterr.New(outposterr.Configuration,
			"copilot: %s names no lastLoggedInUser; log in with `copilot login` or use account:variable with %s", ConfigFile, TokenVar)
	}
	var raw json.RawMessage
	for k, v := range cfg.Tokens {
		// "<host>:<login>"; the host may carry a scheme ("https://…").
		i := strings.LastIndexByte(k, ':')
		if i < 0 {
			continue
		}
		host, login := k[:i], k[i+1:]
		if login != cfg.Last.Login {
			continue
		}
		if cfg.Last.Host != "" && !sameHost(host, cfg.Last.Host) {
			continue
		}
		raw = v
		break
	}
	tok := tokenOf(raw)
	if tok == "" {
		return nil, outposterr.New(outposterr.Configuration,
			"copilot: %s has no token for %s (the login may be in the system keychain); use account:variable with %s",
			ConfigFile, cfg.Last.Login, TokenVar)
	}
	if err := checkToken(tok); err != nil {
		return nil, err
	}
	return []byte(tok), nil
}

// sameHost compares "https://github.com" with "github.com" loosely.
func sameHost(a, b string) bool {
	trim := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
		return strings.TrimRight(strings.ToLower(s), "/")
	}
	return trim(a) == trim(b)
}

func tokenOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var o struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return strings.TrimSpace(o.Token)
	}
	return ""
}

// StripJSONC removes // and /* */ comments and trailing commas before a
// closing bracket or brace, outside strings, so encoding/json can read a
// JSONC document.
func StripJSONC(in []byte) []byte {
	out := make([]byte, 0, len(in))
	inStr, esc := false, false
	for i := 0; i < len(in); i++ {
		c := in[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				i++
			}
			if i < len(in) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(in) && in[i+1] == '*':
			i += 2
			for i+1 < len(in) && !(in[i] == '*' && in[i+1] == '/') {
				i++
			}
			i++ // at '/'
			out = append(out, ' ')
		case c == ']' || c == '}':
			// Drop a trailing comma (and the blanks after it).
			j := len(out) - 1
			for j >= 0 && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
				j--
			}
			if j >= 0 && out[j] == ',' {
				out = append(out[:j], out[j+1:]...)
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}
