package harness

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/gateway"
)

// minSecret is the shortest value the harness treats as a secret: shorter
// values ("1", "true", "us-east1") are settings, and replacing them in a
// CLI's output would garble it.
const minSecret = 8

// secretWords are the parts of a variable's name (split at '_') that make
// its value a secret: API keys, tokens, passwords, credentials and
// connection strings.
var secretWords = []string{
	"KEY", "KEYS", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "PAT", "COOKIE", "PRIVATE", "DSN", "CONNECTION",
}

// secretName reports whether a variable's name says its value is a secret:
// one of its parts (split at '_', any case) is a word such as KEY, TOKEN,
// SECRET, PASSWORD, CREDENTIALS or AUTH, or ends in KEY, TOKEN, SECRET or
// PASSWORD (APIKEY). ANTHROPIC_API_KEY, GH_TOKEN and EVAL_SECRET are;
// GIT_AUTHOR_NAME and PWD are not. The rule errs on the side of hiding:
// MONKEY_MODE, which ends in KEY, is one.
func secretName(name string) bool {
	for part := range strings.SplitSeq(strings.ToUpper(name), "_") {
		for _, w := range secretWords {
			if part == w {
				return true
			}
		}
		for _, end := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD"} {
			if strings.HasSuffix(part, end) {
				return true
			}
		}
	}
	return false
}

// outputRedactor removes the values of a CLI's secret variables from what
// it prints, before anything decodes, keeps or shows a line: events, the
// final text, the tails and the errors built from them. A nil
// outputRedactor changes nothing.
type outputRedactor struct {
	// secrets are the byte strings to replace, longest first, so a secret
	// containing another is replaced whole.
	secrets [][]byte
}

// newOutputRedactor returns the redactor for a CLI started with env: the
// value of every variable whose name is a secret's (secretName), at least
// [minSecret] bytes long, as written and as escaped inside a JSON string.
// It is nil when there is nothing to remove.
func newOutputRedactor(env map[string]string) *outputRedactor {
	seen := map[string]bool{}
	var secrets [][]byte
	add := func(s string) {
		if len(s) >= minSecret && !seen[s] {
			seen[s] = true
			secrets = append(secrets, []byte(s))
		}
	}
	for k, v := range env {
		if !secretName(k) {
			continue
		}
		add(v)
		add(jsonEscaped(v))
	}
	if len(secrets) == 0 {
		return nil
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	return &outputRedactor{secrets: secrets}
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

// line returns line with every secret replaced by [gateway.Redaction]; it
// returns line itself when none occurs.
func (r *outputRedactor) line(line []byte) []byte {
	if r == nil {
		return line
	}
	for _, s := range r.secrets {
		if bytes.Contains(line, s) {
			line = bytes.ReplaceAll(line, s, []byte(gateway.Redaction))
		}
	}
	return line
}
