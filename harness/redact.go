package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
)

// outputRedactor removes the secrets a CLI's lease holds from what it
// prints, before anything decodes, keeps or shows a line: events, the
// final text, the tails and the errors built from them; and masks them in
// the conversation files captured after the turn. A nil outputRedactor
// changes nothing.
type outputRedactor struct {
	// secrets are the byte strings to replace, longest first, so a secret
	// containing another is replaced whole.
	secrets [][]byte
}

// newOutputRedactor returns the redactor for a CLI started with env, whose
// lease also holds the secrets of extra (its login files' tokens, the
// values declared or named secret: attempt.secrets): the value of every
// variable whose name is a [credentials.SecretName] that
// [credentials.LooksSecret], and every extra
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
		if credentials.SecretName(k) && credentials.LooksSecret(v) {
			values = append(values, v)
		}
	}
	for _, v := range values {
		add(v)
		add(jsonEscaped(v, false))
		add(jsonEscaped(v, true))
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
			if !strings.Contains(v, "${") && credentials.SecretName(k) && credentials.LooksSecret(v) {
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

// secretPrintedWarning is the result's warning when the CLI printed a
// secret (Result.SecretPrinted).
const secretPrintedWarning = "the CLI printed a secret the lease holds; it is replaced by " + gateway.Redaction +
	" in everything Outpost shows or keeps"

// joinSecretPrinted carries an earlier attempt's printed secret into r,
// the result that stands for the whole turn (a steered turn's next
// attempt, a repair turn, a reseeded conversation), with its warning once.
func (r *Result) joinSecretPrinted(earlier *Result) {
	r.SecretPrinted = r.SecretPrinted || earlier.SecretPrinted
	if !r.SecretPrinted {
		return
	}
	kept, seen := r.Warnings[:0], false
	for _, w := range r.Warnings {
		if w == secretPrintedWarning {
			if seen {
				continue
			}
			seen = true
		}
		kept = append(kept, w)
	}
	r.Warnings = kept
	if !seen && earlier.SecretPrinted {
		r.Warnings = append(r.Warnings, secretPrintedWarning)
	}
}

// jsonEscaped is s as it appears inside a JSON string, with <, > and &
// escaped as Go's encoder does by default when html is set.
func jsonEscaped(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

// line returns line with every secret replaced by [gateway.Redaction]
// (line itself when none occurs) and whether one was.
func (r *outputRedactor) line(line []byte) ([]byte, bool) {
	if r == nil {
		return line, false
	}
	found := false
	for _, s := range r.secrets {
		if bytes.Contains(line, s) {
			line, found = bytes.ReplaceAll(line, s, []byte(gateway.Redaction)), true
		}
	}
	return line, found
}

// mask returns what overwrites a secret n bytes long in place: "[REDACTED]"
// stretched to n bytes ("[REDACTED**]"), or n asterisks when n is shorter.
func mask(n int) []byte {
	r := gateway.Redaction
	if n < len(r) {
		return bytes.Repeat([]byte("*"), n)
	}
	return []byte(r[:len(r)-1] + strings.Repeat("*", n-len(r)) + r[len(r)-1:])
}

// maskInPlace overwrites every secret in b with its mask and reports
// whether there was one. A nil redactor changes nothing.
func (r *outputRedactor) maskInPlace(b []byte) bool {
	if r == nil {
		return false
	}
	found := false
	for _, s := range r.secrets {
		for i := 0; ; {
			j := bytes.Index(b[i:], s)
			if j < 0 {
				break
			}
			copy(b[i+j:], mask(len(s)))
			i, found = i+j+len(s), true
		}
	}
	return found
}

// masking returns rd with every secret overwritten by its mask, which
// keeps every length (a file's size is written before its content) and
// memory bounded: it holds back at most the longest secret less one byte.
// A nil redactor returns rd.
func (r *outputRedactor) masking(rd io.Reader) io.Reader {
	if r == nil {
		return rd
	}
	return &maskReader{r: r, src: rd, hold: len(r.secrets[0]) - 1}
}

// maskReader is [outputRedactor.masking]'s reader.
type maskReader struct {
	r    *outputRedactor
	src  io.Reader
	hold int
	// buf holds bytes read and masked; its first ready bytes are final.
	buf   []byte
	ready int
	err   error
}

// maskChunk is how much a maskReader reads at a time.
const maskChunk = 32 << 10

func (m *maskReader) Read(p []byte) (int, error) {
	for m.ready == 0 {
		if m.err != nil {
			return 0, m.err
		}
		if cap(m.buf)-len(m.buf) < maskChunk {
			m.buf = append(make([]byte, 0, len(m.buf)+maskChunk), m.buf...)
		}
		n, err := m.src.Read(m.buf[len(m.buf):cap(m.buf)])
		m.buf = m.buf[:len(m.buf)+n]
		m.r.maskInPlace(m.buf)
		if err != nil {
			// The end: nothing more can complete a secret.
			m.err, m.ready = err, len(m.buf)
			continue
		}
		// A secret that starts before the last hold bytes ends inside buf,
		// so it is masked already; the rest may be a secret's beginning.
		m.ready = max(len(m.buf)-m.hold, 0)
	}
	n := copy(p, m.buf[:m.ready])
	m.buf = m.buf[:copy(m.buf, m.buf[n:])]
	m.ready -= n
	return n, nil
}
