package claude

import (
	"encoding/json"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

var (
	_ adapters.Authenticator = (*Adapter)(nil)
	_ adapters.Declarer      = (*Adapter)(nil)
)

// DeclaredVars implements [adapters.Declarer].
func (a *Adapter) DeclaredVars() []string { return []string{APIKeyVar, OAuthTokenVar} }

// Credential variables and files of Claude Code.
const (
	// APIKeyVar is the usage (pay-per-use) key.
	APIKeyVar = "ANTHROPIC_API_KEY"
	// OAuthTokenVar is a long-lived account token from `claude setup-token`.
	OAuthTokenVar = "CLAUDE_CODE_OAUTH_TOKEN"
	// AuthTokenVar sends a bearer token to a gateway.
	AuthTokenVar = "ANTHROPIC_AUTH_TOKEN"
	// CredentialsFile is the account login, relative to the home directory.
	CredentialsFile = ".claude/.credentials.json"
	// ConfigDirVar relocates ~/.claude.
	ConfigDirVar = "CLAUDE_CONFIG_DIR"
)

// onboarded is ~/.claude.json with onboarding completed: a fresh home with
// only a token otherwise starts the interactive onboarding.
var onboarded = []byte(`{"hasCompletedOnboarding":true,"bypassPermissionsModeAccepted":true}` + "\n")

// Credentials plans Claude Code's authentication:
//   - account (default: the host login file): ~/.claude/.credentials.json
//     (or $CLAUDE_CONFIG_DIR/.credentials.json) projected to its claudeAiOauth
//     object, installed in the sandbox home; it rotates, so a newer sandbox
//     copy is written back;
//   - account:variable: CLAUDE_CODE_OAUTH_TOKEN (long-lived, safe to share);
//   - usage: ANTHROPIC_API_KEY.
//
// An API key and an account login together are a configuration error: in
// print mode the key silently wins and bills the API instead of the plan.
func (a *Adapter) Credentials(auth credentials.Auth, vars map[string]string) (credentials.Plan, error) {
	_, hasKey := credentials.Var(vars, APIKeyVar)
	token, hasToken := credentials.Var(vars, OAuthTokenVar)
	switch auth.Form {
	case credentials.None:
		return credentials.Plan{Strip: []string{APIKeyVar, OAuthTokenVar, AuthTokenVar}}, nil
	case credentials.Usage:
		if auth.Source == credentials.SourceFile {
			return credentials.Plan{}, credentials.Unsupported("claude", auth, "account", "account:file", "account:variable", "usage")
		}
		if hasToken {
			return credentials.Plan{}, outposterr.New(outposterr.Configuration,
				"claude: %s and %s are both set; usage authentication needs only the API key", OAuthTokenVar, APIKeyVar)
		}
		key, ok := credentials.Var(vars, APIKeyVar)
		if !ok {
			return credentials.Plan{}, credentials.Missing("claude", APIKeyVar, "create a key in the Anthropic console")
		}
		return credentials.Plan{Env: map[string]string{APIKeyVar: key}, Strip: []string{OAuthTokenVar},
			Bridge: bridge(vars, APIKeyVar, key, "x-api-key", false)}, nil
	case credentials.Account:
		if hasKey {
			return credentials.Plan{}, outposterr.New(outposterr.Configuration,
				"claude: %s takes precedence over account credentials; remove it or choose usage authentication", APIKeyVar)
		}
		if auth.Source == credentials.SourceVariable {
			if !hasToken {
				return credentials.Plan{}, credentials.Missing("claude", OAuthTokenVar, "create one with `claude setup-token`")
			}
			return credentials.Plan{
				Env:       map[string]string{OAuthTokenVar: token},
				Strip:     []string{APIKeyVar, AuthTokenVar},
				Generated: []credentials.Generated{{Dest: ".claude.json", Content: onboarded}},
				Bridge:    bridge(vars, OAuthTokenVar, token, "claude-oauth", true),
			}, nil
		}
		return credentials.Plan{
			Strip: []string{APIKeyVar, AuthTokenVar, OAuthTokenVar},
			Files: []credentials.HostFile{{
				Path: CredentialsFile, RelocateVar: ConfigDirVar, Dest: CredentialsFile,
				Project: projectOAuth, Rotates: true, Fresher: fresherOAuth, Merge: mergeOAuth,
				Login:       "claude, then /login",
				Alternative: "account:variable with " + OAuthTokenVar + " from `claude setup-token`",
			}},
			Generated: []credentials.Generated{{Dest: ".claude.json", Content: onboarded}},
		}, nil
	}
	return credentials.Plan{}, credentials.Unsupported("claude", auth, "account", "account:file", "account:variable", "usage", "none")
}

type oauthFile struct {
	OAuth *struct {
		AccessToken  string `json:"accessToken"`
		RefreshToken string `json:"refreshToken"`
		ExpiresAt    int64  `json:"expiresAt"`
	} `json:"claudeAiOauth"`
}

// projectOAuth keeps only the claudeAiOauth object: MCP OAuth logins and
// anything else in the file stay on the host.
func projectOAuth(content []byte) ([]byte, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(content, &raw); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "claude: %s is not JSON", CredentialsFile)
	}
	o, ok := raw["claudeAiOauth"]
	if !ok {
		return nil, outposterr.New(outposterr.Configuration, "claude: %s has no claudeAiOauth login; log in again with `claude` then /login", CredentialsFile)
	}
	return json.Marshal(map[string]json.RawMessage{"claudeAiOauth": o})
}

// fresherOAuth reports whether the sandbox login is valid and expires later.
func fresherOAuth(host, sandbox []byte) bool {
	var h, s oauthFile
	if json.Unmarshal(sandbox, &s) != nil || s.OAuth == nil || s.OAuth.AccessToken == "" || s.OAuth.RefreshToken == "" {
		return false
	}
	if json.Unmarshal(host, &h) != nil || h.OAuth == nil {
		return true
	}
	return s.OAuth.ExpiresAt > h.OAuth.ExpiresAt
}

// mergeOAuth replaces the host file's claudeAiOauth with the sandbox's,
// keeping every other key of the host file.
func mergeOAuth(host, sandbox []byte) ([]byte, error) {
	var h, s map[string]json.RawMessage
	if err := json.Unmarshal(host, &h); err != nil {
		h = map[string]json.RawMessage{}
	}
	if err := json.Unmarshal(sandbox, &s); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "claude: sandbox credentials are not JSON")
	}
	h["claudeAiOauth"] = s["claudeAiOauth"]
	return json.MarshalIndent(h, "", "  ")
}

// DefaultBaseURL is the Anthropic API a gateway forwards Claude Code to,
// unless the project declares ANTHROPIC_BASE_URL.
const DefaultBaseURL = "https://api.anthropic.com"

// BaseURLVar points Claude Code at another Anthropic-compatible endpoint.
const BaseURLVar = "ANTHROPIC_BASE_URL"

// upstream is the API a gateway forwards Claude Code to: the project's
// ANTHROPIC_BASE_URL, else [DefaultBaseURL].
func upstream(vars map[string]string) string {
	if v, ok := credentials.Var(vars, BaseURLVar); ok {
		return v
	}
	return DefaultBaseURL
}

// Upstreams implements [adapters.Upstreamer]: the Anthropic API, and the
// endpoint the project's ANTHROPIC_BASE_URL names.
func (a *Adapter) Upstreams(vars map[string]string) []string {
	if up := upstream(vars); up != DefaultBaseURL {
		return []string{DefaultBaseURL, up}
	}
	return []string{DefaultBaseURL}
}

// RelocationVars implements [adapters.Relocator].
func (a *Adapter) RelocationVars() []string { return []string{ConfigDirVar} }

// bridge is the gateway bridge of a variable credential.
func bridge(vars map[string]string, name, secret, scheme string, oauth bool) *credentials.Bridge {
	return &credentials.Bridge{Var: name, Secret: secret, Scheme: scheme, Upstream: upstream(vars), OAuth: oauth, Strip: []string{BaseURLVar}}
}
