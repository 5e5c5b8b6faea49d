package harness

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
)

func TestOutputRedactor(t *testing.T) {
	r := newOutputRedactor(map[string]string{
		"A_TOKEN": "tok-12345678", "LONGER_TOKEN": "tok-12345678-and-more", "QUOTED_KEY": `q"uo\te-1`,
		"SHORT_KEY": "abc", "LABEL": "label-12345678",
	})
	require.NotNil(t, r)
	for in, want := range map[string]string{
		"x tok-12345678-and-more y": "x [REDACTED] y", // whole, not in part
		"tok-12345678tok-12345678":  "[REDACTED][REDACTED]",
		`{"t":"q\"uo\\te-1"}`:       `{"t":"[REDACTED]"}`, // as escaped in JSON
		`raw q"uo\te-1`:             "raw [REDACTED]",
		"abc label-12345678":        "abc label-12345678", // short, or not named a secret
	} {
		assert.Equal(t, want, string(r.line([]byte(in))), in)
	}
	assert.Nil(t, newOutputRedactor(map[string]string{"SHORT_KEY": "abc", "LABEL": "label-12345678"}))
	pem := newOutputRedactor(map[string]string{"DEPLOY_PRIVATE_KEY": "-----BEGIN KEY-----\r\nb64-line-one\nb64-two\n-----END KEY-----\n"})
	for in, want := range map[string]string{
		"b64-line-one": "[REDACTED]",  // printed a line at a time
		"x b64-two y":  "x b64-two y", // a line shorter than a secret
		`"k":"-----BEGIN KEY-----\r\nb64-line-one\nb64-two\n-----END KEY-----\n"`: `"k":"[REDACTED]"`, // whole, in JSON
	} {
		assert.Equal(t, want, string(pem.line([]byte(in))), in)
	}
	files := newOutputRedactor(map[string]string{"LABEL": "label-12345678"}, "sk-ant-ort01-login", "short")
	assert.Equal(t, `cat: {"refreshToken":"[REDACTED]"} label-12345678 short`,
		string(files.line([]byte(`cat: {"refreshToken":"sk-ant-ort01-login"} label-12345678 short`))), "a login file's secret")
	var none *outputRedactor
	assert.Equal(t, "tok-12345678", string(none.line([]byte("tok-12345678"))))
}

// TestRunRedactsTheCLIsSecrets: a value the lease was given in a secret's
// variable, which the CLI prints, reaches no event, text, tail or error of
// the result; other values stay.
func TestRunRedactsTheCLIsSecrets(t *testing.T) {
	const marker = "MARK-secret-c4f2e9"
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
env EVAL_SECRET
env EVAL_LABEL
emit {"type":"tool-result","text":"echo: MARK-secret-c4f2e9"}
stderr curl: (22) 401 with key MARK-secret-c4f2e9
emit {"type":"failure","text":"refused MARK-secret-c4f2e9","status":401}
exit 3`)
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None},
		Vars: map[string]string{"EVAL_SECRET": marker, "EVAL_LABEL": "label-visible"}}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	out, jerr := json.Marshal(res)
	require.NoError(t, jerr)
	all := string(out) + "\n" + err.Error()
	assert.NotContains(t, all, marker)
	assert.Contains(t, res.Text, "EVAL_SECRET="+gateway.Redaction)
	assert.Contains(t, res.Text, "EVAL_LABEL=label-visible", "a value not named a secret is kept")
	assert.Contains(t, res.StderrTail, "401 with key "+gateway.Redaction)
	assert.Contains(t, err.Error(), gateway.Redaction)
}

// declaring is the fake CLI's adapter naming EVAL_PW as its own variable
// (as a driver's "secrets" does).
type declaring struct{ adapters.Adapter }

func (declaring) DeclaredVars() []string { return []string{"EVAL_PW"} }

func TestDeclaredSecrets(t *testing.T) {
	vars := map[string]string{"EVAL_PW": "pw-declared-1", "MCP_REF": "ref-value-1", "OTHER": "other-value-1"}
	in := adapters.Input{MCP: []credentials.MCPServer{{Name: "docs", URL: "http://127.0.0.1:9/mcp",
		Headers: map[string]string{"Authorization": "Bearer literal-1", "X-Ref": "${MCP_REF}"}},
		{Name: "fs", Command: "fs", Env: map[string]string{"FS_TOKEN": "literal-token-1", "FS_MODE": "literal-mode-1"}}}}
	assert.ElementsMatch(t, []string{"pw-declared-1", "ref-value-1", "Bearer literal-1", "literal-1", "literal-token-1"},
		declaredSecrets(declaring{}, in, vars))
	assert.ElementsMatch(t, []string{"ref-value-1", "Bearer literal-1", "literal-1", "literal-token-1"},
		declaredSecrets(nil, in, vars), "an adapter declaring nothing")
}

// TestRunRedactsDeclaredSecrets: a value the adapter declares as its own
// secret is replaced whatever its variable's name.
func TestRunRedactsDeclaredSecrets(t *testing.T) {
	turn := fakeTurn(t, "env EVAL_PW\nenv EVAL_LABEL\n"+`emit {"type":"finished","ok":true}`)
	turn.Adapter = declaring{turn.Adapter}
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None},
		Vars: map[string]string{"EVAL_PW": "MARK-pw-81d0", "EVAL_LABEL": "label-visible"}}
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "EVAL_PW="+gateway.Redaction+"\nEVAL_LABEL=label-visible", res.Text)
}
