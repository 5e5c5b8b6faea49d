package outposttest

import "fmt"

// CodexProvider is the model provider id [CodexArgs] defines.
const CodexProvider = "outposttest"

// CodexKeyEnv is the variable [CodexEnv] puts the placeholder key in, and
// that [CodexArgs] names as the provider's env_key.
const CodexKeyEnv = "OUTPOSTTEST_API_KEY"

// CodexArgs returns the global `-c` overrides that point Codex CLI at srv's
// Responses API through a custom model provider, with retries bounded by
// retries (stream_max_retries and request_max_retries) and the update check
// off. They go before the subcommand: `codex <CodexArgs…> exec --json …`.
// The key travels in the environment ([CodexEnv]), never in argv.
func CodexArgs(srv *Server, retries int) []string {
	p := "model_providers." + CodexProvider + "."
	return []string{
		"-c", "model_provider=" + CodexProvider,
		"-c", p + `name="outposttest"`,
		"-c", p + `base_url="` + srv.URL() + `/v1"`,
		"-c", p + `wire_api="responses"`,
		"-c", p + `env_key="` + CodexKeyEnv + `"`,
		"-c", p + "requires_openai_auth=false",
		"-c", p + fmt.Sprintf("stream_max_retries=%d", retries),
		"-c", p + fmt.Sprintf("request_max_retries=%d", retries),
		"-c", "check_for_update_on_startup=false",
	}
}

// CodexEnv returns the environment [CodexArgs] expects: the placeholder key
// under [CodexKeyEnv]. HOME is not included: give every run a fresh one
// (Codex creates ~/.codex itself).
func CodexEnv(srv *Server) map[string]string {
	_ = srv
	return map[string]string{CodexKeyEnv: PlaceholderKey}
}
