package harness

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
)

// redactLine is r.line's line.
func redactLine(r *outputRedactor, in string) string {
	out, _ := r.line([]byte(in))
	return string(out)
}

func TestOutputRedactor(t *testing.T) {
	r := newOutputRedactor(map[string]string{
		"A_TOKEN": "tok-12345678", "LONGER_TOKEN": "tok-12345678-and-more", "QUOTED_KEY": `q"uo\te-1`,
		"SHORT_KEY": "abc", "LABEL": "label-12345678", "HTML_KEY": "a<b>&c-1234", "DB_PASSWORD": "postgres",
	})
	require.NotNil(t, r)
	for in, want := range map[string]string{
		"x tok-12345678-and-more y":          "x [REDACTED] y", // whole, not in part
		"tok-12345678tok-12345678":           "[REDACTED][REDACTED]",
		`{"t":"q\"uo\\te-1"}`:                `{"t":"[REDACTED]"}`, // as escaped in JSON
		`raw q"uo\te-1`:                      "raw [REDACTED]",
		"abc label-12345678":                 "abc label-12345678",  // short, or not named a secret
		"connect to postgres":                "connect to postgres", // one short word: a test service's setting
		`{"h":"a\u003cb\u003e\u0026c-1234"}`: `{"h":"[REDACTED]"}`,  // as Go escapes it
	} {
		assert.Equal(t, want, redactLine(r, in), in)
	}
	assert.Nil(t, newOutputRedactor(map[string]string{"SHORT_KEY": "abc", "LABEL": "label-12345678"}))
	pem := newOutputRedactor(map[string]string{"DEPLOY_PRIVATE_KEY": "-----BEGIN KEY-----\r\nb64-line-one\nb64-two\n-----END KEY-----\n"})
	for in, want := range map[string]string{
		"b64-line-one": "[REDACTED]",  // printed a line at a time
		"x b64-two y":  "x b64-two y", // a line shorter than a secret
		`"k":"-----BEGIN KEY-----\r\nb64-line-one\nb64-two\n-----END KEY-----\n"`: `"k":"[REDACTED]"`, // whole, in JSON
	} {
		assert.Equal(t, want, redactLine(pem, in), in)
	}
	files := newOutputRedactor(map[string]string{"LABEL": "label-12345678"}, "sk-ant-ort01-login", "short")
	assert.Equal(t, `cat: {"refreshToken":"[REDACTED]"} label-12345678 short`,
		redactLine(files, `cat: {"refreshToken":"sk-ant-ort01-login"} label-12345678 short`), "a login file's secret")
	var none *outputRedactor
	assert.Equal(t, "tok-12345678", redactLine(none, "tok-12345678"))
	_, found := r.line([]byte("nothing secret"))
	assert.False(t, found)
	_, found = r.line([]byte("a tok-12345678"))
	assert.True(t, found)
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
	assert.Equal(t, 1, res.Counts[adapters.KindWarning], "one warning, however often the secret was printed")
	assert.True(t, res.SecretPrinted)
	assert.True(t, res.Outcome().SecretPrinted)
	assert.Contains(t, res.Warnings, "the CLI printed a secret the lease holds; it is replaced by [REDACTED] in everything Outpost shows or keeps")
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
	assert.Len(t, res.Warnings, 1, "the printed secret is reported")

	// A value named secret explicitly is one even if it is a plain word.
	turn = fakeTurn(t, "env DB_PASSWORD\nenv PG_PASSWORD\n"+`emit {"type":"finished","ok":true}`)
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None}, Secret: []string{"DB_PASSWORD"},
		Vars: map[string]string{"DB_PASSWORD": "postgres", "PG_PASSWORD": "changeme"}}
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "DB_PASSWORD="+gateway.Redaction+"\nPG_PASSWORD=changeme", res.Text)

	// A turn that prints no secret says nothing of the kind.
	turn = fakeTurn(t, "env EVAL_LABEL\n"+`emit {"type":"finished","ok":true}`)
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None},
		Vars: map[string]string{"EVAL_PW_KEY": "MARK-pw-81d0", "EVAL_LABEL": "label-visible"}}
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	assert.False(t, res.SecretPrinted)
	assert.Empty(t, res.Warnings)
}

func TestMask(t *testing.T) {
	assert.Equal(t, "********", string(mask(8)))
	assert.Equal(t, "[REDACTED]", string(mask(10)))
	assert.Equal(t, "[REDACTED***]", string(mask(13)))
}

// TestMaskingReader: every secret is masked in place whatever the reads'
// sizes and where the secrets fall across them, and the length is kept.
func TestMaskingReader(t *testing.T) {
	r := newOutputRedactor(map[string]string{"A_TOKEN": "tok-12345678", "LONG_SECRET": strings.Repeat("s", 40) + "-end"})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var in, want strings.Builder
		for range rng.IntN(40) {
			switch rng.IntN(4) {
			case 0:
				in.WriteString("tok-12345678")
				want.WriteString("[REDACTED**]")
			case 1:
				in.WriteString(strings.Repeat("s", 40) + "-end")
				want.WriteString(string(mask(44)))
			default:
				chunk := strings.Repeat("x", rng.IntN(maskChunk/8)) + "tok-1234567" // a prefix only
				in.WriteString(chunk)
				want.WriteString(chunk)
			}
		}
		got, err := io.ReadAll(iotest.OneByteReader(r.masking(&randomReads{strings.NewReader(in.String()), rng})))
		if i%2 == 0 {
			got, err = io.ReadAll(r.masking(&randomReads{strings.NewReader(in.String()), rng}))
		}
		require.NoError(t, err)
		require.Equal(t, want.String(), string(got), "input %d", i)
	}
	var none *outputRedactor
	src := strings.NewReader("tok-12345678")
	assert.Same(t, io.Reader(src), none.masking(src))
}

// randomReads returns at most a random number of bytes from each Read.
type randomReads struct {
	r   io.Reader
	rng *rand.Rand
}

func (r *randomReads) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1+r.rng.IntN(len(p))]
	}
	return r.r.Read(p)
}

// TestCaptureMasksSecrets: a secret the CLI wrote into its conversation
// files is masked in the stored conversation, at its length, and the
// continued turn reads the mask.
func TestCaptureMasksSecrets(t *testing.T) {
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	creds := &Credentials{Auth: credentials.Auth{Form: credentials.None}, Vars: map[string]string{"EVAL_SECRET": "MARK-stored-5b1c"}}
	turn := storeTurn(t, store, `emit {"type":"conversation","id":"c1"}
put .fake/sessions/c1.jsonl {"tool_result":"MARK-stored-5b1c","cwd":"x"}
put .fake/sessions/c1/sidecar key=MARK-stored-5b1c
`+finished)
	turn.Credentials = creds
	_, err = Run(context.Background(), turn)
	require.NoError(t, err)
	_, rc, err := store.Load(context.Background(), "c1")
	require.NoError(t, err)
	archive, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.False(t, strings.Contains(string(archive), "MARK-stored"), "the secret is in the stored conversation")
	assert.True(t, strings.Contains(string(archive), `{"tool_result":"[REDACTED******]","cwd":"x"}`), "masked in place")

	turn = storeTurn(t, store, "cat .fake/sessions/c1/sidecar\n"+finished)
	turn.Credentials = creds
	turn.Input.Continue = "c1"
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Contains(t, res.Text, ".fake/sessions/c1/sidecar: key=[REDACTED******]")
}

// TestJoinSecretPrinted: a turn made of several attempts says once that
// a secret was printed, whichever attempt printed it.
func TestJoinSecretPrinted(t *testing.T) {
	for _, c := range []struct {
		earlier, later bool
		laterWarnings  []string
	}{
		{true, false, []string{"other"}},
		{false, true, []string{secretPrintedWarning, "other"}},
		{true, true, []string{secretPrintedWarning, "other", secretPrintedWarning}},
	} {
		r := &Result{SecretPrinted: c.later, Warnings: append([]string(nil), c.laterWarnings...)}
		r.joinSecretPrinted(&Result{SecretPrinted: c.earlier})
		assert.True(t, r.SecretPrinted)
		n := 0
		for _, w := range r.Warnings {
			if w == secretPrintedWarning {
				n++
			}
		}
		assert.Equal(t, 1, n, "%+v: %v", c, r.Warnings)
		assert.Contains(t, r.Warnings, "other")
	}
	r := &Result{Warnings: []string{"other"}}
	r.joinSecretPrinted(&Result{})
	assert.False(t, r.SecretPrinted)
	assert.Equal(t, []string{"other"}, r.Warnings)
}
