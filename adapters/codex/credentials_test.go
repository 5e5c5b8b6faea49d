package codex

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestCredentialsPlans(t *testing.T) {
	a := New()
	p, err := a.Credentials(credentials.Auth{Form: credentials.Account}, nil)
	require.NoError(t, err)
	require.Len(t, p.Files, 1)
	assert.Equal(t, AuthFile, p.Files[0].Dest)
	assert.Equal(t, HomeVar, p.Files[0].RelocateVar)
	assert.True(t, p.Files[0].Rotates)
	assert.ElementsMatch(t, []string{OpenAIKeyVar, CodexKeyVar}, p.Strip)

	p, err = a.Credentials(credentials.Auth{Form: credentials.Usage}, map[string]string{OpenAIKeyVar: "sk-1"})
	require.NoError(t, err)
	require.Len(t, p.Logins, 1)
	assert.Equal(t, []string{"codex", "login", "--with-api-key"}, p.Logins[0].Args)
	assert.Equal(t, OpenAIKeyVar, p.Logins[0].StdinVar, "the key reaches the login on stdin, never argv")

	p, err = a.Credentials(credentials.Auth{Form: credentials.Usage, Source: credentials.SourceVariable}, map[string]string{CodexKeyVar: "sk-2"})
	require.NoError(t, err)
	assert.Equal(t, "sk-2", p.Env[CodexKeyVar])
	assert.Empty(t, p.Logins)

	for _, tc := range []struct {
		auth credentials.Auth
		vars map[string]string
		want string
	}{
		{credentials.Auth{Form: credentials.Usage}, nil, "missing OPENAI_API_KEY"},
		{credentials.Auth{Form: credentials.Account}, map[string]string{CodexKeyVar: "k"}, "takes precedence"},
		{credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable}, nil, "does not support"},
	} {
		_, err := a.Credentials(tc.auth, tc.vars)
		require.Error(t, err)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestFresherAuth(t *testing.T) {
	host := []byte(`{"tokens":{"access_token":"a","refresh_token":"r"},"last_refresh":"2026-12-01T00:00:00Z"}`)
	newer := []byte(`{"tokens":{"access_token":"a2","refresh_token":"r2"},"last_refresh":"2026-12-02T00:00:00Z"}`)
	assert.True(t, fresherAuth(host, newer))
	assert.False(t, fresherAuth(newer, host))
	assert.False(t, fresherAuth(host, []byte(`{"tokens":{"access_token":""},"last_refresh":"2027-01-01T00:00:00Z"}`)))
}
