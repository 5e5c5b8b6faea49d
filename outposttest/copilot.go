package outposttest

import "os"

// CopilotModel is the model [CopilotEnv] names (a model of Copilot's
// built-in catalog, so it knows its token limits and tool support).
const CopilotModel = "gpt-4.1"

// CopilotEnv returns the environment variables that point GitHub Copilot
// CLI at srv's Chat Completions API in BYOK mode: COPILOT_OFFLINE=true (no
// GitHub authentication, telemetry or update check), COPILOT_PROVIDER_TYPE
// openai, COPILOT_PROVIDER_BASE_URL <srv>/v1, a placeholder
// COPILOT_PROVIDER_API_KEY, COPILOT_MODEL, COPILOT_AUTO_UPDATE=false and
// XDG_CACHE_HOME (Copilot unpacks its bundled tree there: it must be
// writable and executable) under the system temporary directory. HOME (or
// COPILOT_HOME) is not included: give every run a fresh one.
func CopilotEnv(srv *Server) map[string]string {
	return map[string]string{
		"COPILOT_OFFLINE":           "true",
		"COPILOT_PROVIDER_TYPE":     "openai",
		"COPILOT_PROVIDER_BASE_URL": srv.URL() + "/v1",
		"COPILOT_PROVIDER_API_KEY":  PlaceholderKey,
		"COPILOT_MODEL":             CopilotModel,
		"COPILOT_AUTO_UPDATE":       "false",
		"XDG_CACHE_HOME":            os.TempDir() + "/outposttest-copilot-cache",
	}
}
