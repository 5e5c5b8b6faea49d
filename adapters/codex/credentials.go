package codex

import (
	"encoding/json"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

var (
	_ adapters.Authenticator = (*Adapter)(nil)
	_ adapters.Declarer      = (*Adapter)(nil)
)

// Credential files and variables of Codex.
const (
	// AuthFile is the file credential store, relative to the home.
	AuthFile = ".codex/auth.json"
	// HomeVar relocates ~/.codex.
	HomeVar = "CODEX_HOME"
	// OpenAIKeyVar is the usage key, stored by `codex login --with-api-key`.
	OpenAIKeyVar = "OPENAI_API_KEY"
	// CodexKeyVar is read by `codex exec` directly (no login needed).
	CodexKeyVar = "CODEX_API_KEY"
)

// DeclaredVars implements [adapters.Declarer].
func (a *Adapter) DeclaredVars() []string { return []string{OpenAIKeyVar, CodexKeyVar} }

// Credentials plans Codex's authentication:
//   - account (file): the host ~/.codex/auth.json (or $CODEX_HOME/auth.json)
//     installed in the sandbox home; its refresh token rotates, so a newer
//     sandbox copy (later last_refresh, tokens present) is written back; it
//     is never handed to two sandboxes at once unless the caller opts in;
//   - usage (default): OPENAI_API_KEY, stored in the sandbox by
//     `codex login --with-api-key` reading the key from stdin;
//   - usage:variable: CODEX_API_KEY in the environment, read by exec itself
//     (no login; the form the host sandbox can use).
//
// API keys are stripped from account runs: exec would bill the key instead.
func (a *Adapter) Credentials(auth credentials.Auth, vars map[string]string) (credentials.Plan, error) {
	keys := []string{OpenAIKeyVar, CodexKeyVar}
	switch auth.Form {
	case credentials.None:
		return credentials.Plan{Strip: keys}, nil
	case credentials.Account:
		if auth.Source == credentials.SourceVariable {
			return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "usage", "usage:variable")
		}
		if _, ok := credentials.Var(vars, CodexKeyVar); ok {
			return credentials.Plan{}, outposterr.New(outposterr.Configuration,
				"codex: %s takes precedence over the account login; remove it or choose usage authentication", CodexKeyVar)
		}
		return credentials.Plan{Strip: keys, Files: []credentials.HostFile{{
			Path: AuthFile, RelocateVar: HomeVar, Dest: AuthFile, Rotates: true, Fresher: fresherAuth,
			// A ChatGPT login's refresh token is single-use: two sandboxes
			// refreshing it would log each other out.
			Exclusive:   true,
			Login:       `codex -c cli_auth_credentials_store="file" login`,
			Alternative: "usage with " + OpenAIKeyVar,
		}}}, nil
	case credentials.Usage:
		if auth.Source == credentials.SourceFile {
			return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "usage", "usage:variable")
		}
		if auth.Source == credentials.SourceVariable {
			key, ok := credentials.Var(vars, CodexKeyVar)
			if !ok {
				return credentials.Plan{}, credentials.Missing(Name, CodexKeyVar, "")
			}
			return credentials.Plan{Env: map[string]string{CodexKeyVar: key}, Strip: []string{OpenAIKeyVar},
				Bridge: &credentials.Bridge{Var: CodexKeyVar, Secret: key, Scheme: "bearer", Upstream: DefaultBaseURL}}, nil
		}
		key, ok := credentials.Var(vars, OpenAIKeyVar)
		if !ok {
			return credentials.Plan{}, credentials.Missing(Name, OpenAIKeyVar, "create a key in the OpenAI dashboard")
		}
		return credentials.Plan{
			Env:    map[string]string{OpenAIKeyVar: key},
			Strip:  []string{CodexKeyVar},
			Logins: []credentials.Login{{Args: []string{"codex", "login", "--with-api-key"}, StdinVar: OpenAIKeyVar}},
			Bridge: &credentials.Bridge{Var: OpenAIKeyVar, Secret: key, Scheme: "bearer", Upstream: DefaultBaseURL},
		}, nil
	}
	return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "usage", "usage:variable", "none")
}

// fresherAuth reports whether the sandbox auth.json holds tokens refreshed
// after the host's.
func fresherAuth(host, sandbox []byte) bool {
	type authFile struct {
		Tokens *struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		} `json:"tokens"`
		LastRefresh time.Time `json:"last_refresh"`
	}
	var h, s authFile
	if json.Unmarshal(sandbox, &s) != nil || s.Tokens == nil || s.Tokens.AccessToken == "" || s.Tokens.RefreshToken == "" {
		return false
	}
	if json.Unmarshal(host, &h) != nil {
		return true
	}
	return s.LastRefresh.After(h.LastRefresh)
}

// DefaultBaseURL is the OpenAI API a gateway forwards Codex to.
const DefaultBaseURL = "https://api.openai.com"

// Upstreams implements [adapters.Upstreamer]: the OpenAI API.
func (a *Adapter) Upstreams(map[string]string) []string { return []string{DefaultBaseURL} }

// RelocationVars implements [adapters.Relocator].
func (a *Adapter) RelocationVars() []string { return []string{HomeVar} }
