package outposttest

// PlaceholderKey is the API key [ClaudeEnv] hands to the CLI. The server
// accepts any credential (use [ScenarioUnauthorized] to test a rejected one).
const PlaceholderKey = "sk-test-placeholder"

// PlaceholderOAuthToken is the subscription token [ClaudeOAuthEnv] hands to
// the CLI. It is not a real token; the server accepts anything.
const PlaceholderOAuthToken = "sk-ant-oat01-outposttest-placeholder"

// ClaudeEnv returns the environment variables that point Claude Code at srv
// in API-key mode: ANTHROPIC_BASE_URL, a placeholder ANTHROPIC_API_KEY, and
// the switches that keep it from other network traffic and from updating
// itself. HOME is not included: give every run a fresh one. Add
// CLAUDE_CODE_MAX_RETRIES to keep error scenarios short, and IS_SANDBOX=1
// when running --dangerously-skip-permissions as root.
func ClaudeEnv(srv *Server) map[string]string {
	return map[string]string{
		"ANTHROPIC_BASE_URL":                       srv.URL(),
		"ANTHROPIC_API_KEY":                        PlaceholderKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
	}
}

// ClaudeOAuthEnv is [ClaudeEnv] in subscription mode: CLAUDE_CODE_OAUTH_TOKEN
// (a placeholder) instead of ANTHROPIC_API_KEY. In this mode Claude Code
// reads the subscription rate-limit headers, prints rate_limit_event lines,
// and reports [ScenarioQuota] as "You've hit your 5-hour limit · resets …".
func ClaudeOAuthEnv(srv *Server) map[string]string {
	env := ClaudeEnv(srv)
	delete(env, "ANTHROPIC_API_KEY")
	env["CLAUDE_CODE_OAUTH_TOKEN"] = PlaceholderOAuthToken
	return env
}
