package claude

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestCredentialsPlans(t *testing.T) {
	a := New()
	tests := []struct {
		name    string
		auth    string
		vars    map[string]string
		env     map[string]string
		files   int
		gen     int
		errText string
	}{
		{name: "account file", auth: "account", files: 1, gen: 1},
		{name: "account file explicit", auth: "account:file", files: 1, gen: 1},
		{name: "account token", auth: "account:variable", vars: map[string]string{OAuthTokenVar: "tok"}, env: map[string]string{OAuthTokenVar: "tok"}, gen: 1},
		{name: "account token missing", auth: "account:variable", errText: "missing CLAUDE_CODE_OAUTH_TOKEN"},
		{name: "account with api key", auth: "account", vars: map[string]string{APIKeyVar: "k"}, errText: "takes precedence"},
		{name: "usage", auth: "usage", vars: map[string]string{APIKeyVar: "k"}, env: map[string]string{APIKeyVar: "k"}},
		{name: "usage missing", auth: "usage", errText: "missing ANTHROPIC_API_KEY"},
		{name: "usage with token", auth: "usage", vars: map[string]string{APIKeyVar: "k", OAuthTokenVar: "t"}, errText: "both set"},
		{name: "usage from file", auth: "usage:file", vars: map[string]string{APIKeyVar: "k"}, errText: "does not support usage:file"},
		{name: "none", auth: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := credentials.ParseAuth(tc.auth)
			require.NoError(t, err)
			p, err := a.Credentials(auth, tc.vars)
			if tc.errText != "" {
				require.Error(t, err)
				assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
				assert.Contains(t, err.Error(), tc.errText)
				for _, v := range tc.vars {
					assert.NotContains(t, err.Error(), "="+v, "no value in errors")
				}
				return
			}
			require.NoError(t, err)
			if tc.env == nil {
				assert.Empty(t, p.Env)
			} else {
				assert.Equal(t, tc.env, p.Env)
			}
			assert.Len(t, p.Files, tc.files)
			assert.Len(t, p.Generated, tc.gen)
			if tc.files > 0 {
				f := p.Files[0]
				assert.Equal(t, CredentialsFile, f.Dest)
				assert.Equal(t, ConfigDirVar, f.RelocateVar)
				assert.True(t, f.Rotates)
				assert.Contains(t, p.Strip, APIKeyVar)
			}
		})
	}
}

func TestOAuthProjectionAndWriteBack(t *testing.T) {
	host := []byte(`{"claudeAiOauth":{"accessToken":"a1","refreshToken":"r1","expiresAt":100},"mcpOAuth":{"srv":{"token":"m"}}}`)
	proj, err := projectOAuth(host)
	require.NoError(t, err)
	assert.JSONEq(t, `{"claudeAiOauth":{"accessToken":"a1","refreshToken":"r1","expiresAt":100}}`, string(proj))
	_, err = projectOAuth([]byte(`{"other":1}`))
	assert.Error(t, err)
	_, err = projectOAuth([]byte(`not json`))
	assert.Error(t, err)

	newer := []byte(`{"claudeAiOauth":{"accessToken":"a2","refreshToken":"r2","expiresAt":200}}`)
	assert.True(t, fresherOAuth(host, newer))
	assert.False(t, fresherOAuth(host, proj), "same expiry is not newer")
	assert.False(t, fresherOAuth(host, []byte(`{"claudeAiOauth":{"accessToken":"","expiresAt":900}}`)), "invalid login never written back")
	merged, err := mergeOAuth(host, newer)
	require.NoError(t, err)
	assert.JSONEq(t, `{"claudeAiOauth":{"accessToken":"a2","refreshToken":"r2","expiresAt":200},"mcpOAuth":{"srv":{"token":"m"}}}`, string(merged))
}
