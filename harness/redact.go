package harness

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
)

// outputRedactor removes the values of a CLI's secret variables from what
// it prints, before anything decodes, keeps or shows a line: events, the
// final text, the tails and the errors built from them. A nil
// outputRedactor changes nothing.
type outputRedactor struct {
	// secrets are the byte strings to replace, longest first, so a secret
	// containing another is replaced whole.
	secrets [][]byte
}

// newOutputRedactor returns the redactor for a CLI started with env, whose
// lease holds the secrets of extra (its login files'): the value of every
// variable whose name is a [credentials.SecretName], and every extra
// secret, each at least [credentials.MinSecret] bytes long, as written and
// as escaped inside a JSON string (and, for a secret of several lines, each
// line). It is nil when there is nothing to remove.
func newOutputRedactor(env map[string]string, extra ...string) *outputRedactor {
	seen := map[string]bool{}
	var secrets [][]byte
	add := func(s string) {
		if len(s) >= credentials.MinSecret && !seen[s] {
			seen[s] = true
			secrets = append(secrets, []byte(s))
		}
	}
	values := append([]string(nil), extra...)
	for k, v := range env {
		if credentials.SecretName(k) {
			values = append(values, v)
		}
	}
	for _, v := range values {
		add(v)
		add(jsonEscaped(v))
		// A secret of several lines (a PEM key) is printed, and read, a
		// line at a time: each of its lines is a secret too.
		if strings.ContainsAny(v, "\r\n") {
			for l := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(strings.TrimSpace(l))
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	return &outputRedactor{secrets: secrets}
}

// declaredSecrets are the values a turn's lease holds that are secrets by
// declaration rather than by their variable's name: the declared variables
// the adapter names as its own (a driver's "secrets", a CLI's credential
// variables) and those an MCP server references, every MCP header given
// literally (and its credentials after a scheme: "Bearer TOKEN"), and the
// literal MCP environment values under a secret's name.
func declaredSecrets(a adapters.Adapter, in adapters.Input, vars map[string]string) []string {
	var names []string
	if d, ok := a.(adapters.Declarer); ok {
		names = append(names, d.DeclaredVars()...)
	}
	var out []string
	for _, s := range in.MCP {
		names = append(names, s.Vars()...)
		for _, v := range s.Headers {
			if !strings.Contains(v, "${") {
				out = append(out, v)
				if _, token, ok := strings.Cut(v, " "); ok {
					out = append(out, token) // "Bearer TOKEN": the token alone too
				}
			}
		}
		for k, v := range s.Env {
			if !strings.Contains(v, "${") && credentials.SecretName(k) {
				out = append(out, v)
			}
		}
	}
	for _, n := range names {
		if v, ok := vars[n]; ok {
			out = append(out, v)
		}
	}
	return out
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
