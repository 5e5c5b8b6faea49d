package credentials

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GH_TOKEN": true, "COPILOT_GITHUB_TOKEN": true,
		"CLAUDE_CODE_OAUTH_TOKEN": true, "EVAL_SECRET": true, "DB_PASSWORD": true, "aws_secret_access_key": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "NPM_CONFIG__AUTH": true, "SENTRY_DSN": true, "MYAPIKEY": true,
		"accessToken": true, "refreshToken": true, "id_token": true, "apiKey": true, "x-api-key": true,
		"GIT_AUTHOR_NAME": false, "PWD": false, "PATH": false, "ANTHROPIC_BASE_URL": false, "TZ": false,
		"KEYBOARD": false, "EVAL_LABEL": false, "account_id": false, "expiresAt": false, "author": false,
	} {
		assert.Equal(t, want, SecretName(name), name)
	}
}

func TestFileSecrets(t *testing.T) {
	claude := `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-abcdefgh","refreshToken":"sk-ant-ort01-ijklmnop",
		"expiresAt":1767225600000,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`
	assert.ElementsMatch(t, []string{"sk-ant-oat01-abcdefgh", "sk-ant-ort01-ijklmnop"}, FileSecrets([]byte(claude)))
	codex := `{"OPENAI_API_KEY":null,"tokens":{"id_token":"eyJhbGciOi.x.y","access_token":"eyJhbGciOi.a.b",
		"refresh_token":"rt_12345678","account_id":"3f1e0c2a-0000-4000-8000-000000000000"},"last_refresh":"2026-12-01T00:00:00Z"}`
	assert.ElementsMatch(t, []string{"eyJhbGciOi.x.y", "eyJhbGciOi.a.b", "rt_12345678", "3f1e0c2a-0000-4000-8000-000000000000"},
		FileSecrets([]byte(codex)), "every string under tokens (the account id too); not the time")
	assert.Equal(t, []string{"ya29.bare-token-value"}, FileSecrets([]byte("ya29.bare-token-value\n")), "a bare token")
	assert.Empty(t, FileSecrets([]byte("short\n")))
	assert.Empty(t, FileSecrets([]byte("line one is long enough\nline two\n")), "not a token")
	assert.Empty(t, FileSecrets([]byte(`{"token":"short","name":"a-long-enough-value"}`)))
}

func TestLooksSecret(t *testing.T) {
	for v, want := range map[string]bool{
		"postgres": false, "changeme": false, "password": false, "short1": false, "PASSWORD": false,
		"hunter22": true, "P@ssword": true, "sk-ant-api03-abc": true, "averyveryverylongword": true,
		"MARK-secret-eval-42": true,
	} {
		assert.Equal(t, want, LooksSecret(v), v)
	}
}
