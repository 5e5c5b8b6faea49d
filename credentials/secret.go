package credentials

import (
	"encoding/json"
	"strings"
	"unicode"
)

// MinSecret is the shortest value treated as a secret: shorter values ("1",
// "true", "us-east1") are settings, and replacing them in a CLI's output
// would garble it.
const MinSecret = 8

// secretWords are the parts of a name that make its value a secret: API
// keys, tokens, passwords, credentials and connection strings.
var secretWords = map[string]bool{
	"KEY": true, "KEYS": true, "TOKEN": true, "TOKENS": true, "SECRET": true, "SECRETS": true,
	"PASSWORD": true, "PASSWD": true, "PASSPHRASE": true, "CREDENTIAL": true, "CREDENTIALS": true,
	"CREDS": true, "AUTH": true, "PAT": true, "COOKIE": true, "PRIVATE": true, "DSN": true, "CONNECTION": true,
}

// secretEnds are endings of a part that make it a secret's (APIKEY).
var secretEnds = []string{"KEY", "TOKEN", "SECRET", "PASSWORD"}

// SecretName reports whether a variable's or a field's name says its value
// is a secret: one of its parts — split at '_', '-', '.' and where a
// lowercase letter meets an uppercase one, any case — is a word such as
// KEY, TOKEN, SECRET, PASSWORD, CREDENTIALS, AUTH or DSN, or ends in KEY,
// TOKEN, SECRET or PASSWORD. ANTHROPIC_API_KEY, GH_TOKEN, EVAL_SECRET,
// accessToken and refresh_token are; GIT_AUTHOR_NAME, PWD and account_id
// are not. The rule errs on the side of hiding: MONKEY_MODE, whose first
// part ends in KEY, is one.
func SecretName(name string) bool {
	for _, part := range nameParts(name) {
		if secretWords[part] {
			return true
		}
		for _, end := range secretEnds {
			if strings.HasSuffix(part, end) {
				return true
			}
		}
	}
	return false
}

// LooksSecret reports whether v, the value of a variable named like a
// secret, is taken for one: at least [MinSecret] bytes, and either 16 or
// more or mixing two kinds of character (lower case, upper case, digits,
// others). A single short word ("postgres", "changeme") is a setting of a
// test service, and replacing it wherever the CLI prints it would garble
// its output; naming the variable explicitly (outpost --secret) hides it
// all the same.
func LooksSecret(v string) bool {
	if len(v) < MinSecret {
		return false
	}
	if len(v) >= 16 {
		return true
	}
	var lower, upper, digit, other bool
	for _, r := range v {
		switch {
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		default:
			other = true
		}
	}
	kinds := 0
	for _, k := range []bool{lower, upper, digit, other} {
		if k {
			kinds++
		}
	}
	return kinds >= 2
}

// nameParts splits a name into upper-cased parts.
func nameParts(name string) []string {
	var parts []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, strings.ToUpper(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return parts
}

// FileSecrets returns the secrets in a credential file's content: in a
// JSON document, every string at least [MinSecret] bytes long under a
// field whose name is a [SecretName] (at any depth; a string in an array
// counts under the array's field); any other content, trimmed, when it is
// one line of at least MinSecret bytes (a bare token).
func FileSecrets(content []byte) []string {
	var doc any
	if err := json.Unmarshal(content, &doc); err != nil {
		s := strings.TrimSpace(string(content))
		if len(s) >= MinSecret && !strings.ContainsAny(s, "\r\n") {
			return []string{s}
		}
		return nil
	}
	var out []string
	var walk func(v any, secret bool)
	walk = func(v any, secret bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(e, secret || SecretName(k))
			}
		case []any:
			for _, e := range v {
				walk(e, secret)
			}
		case string:
			if secret && len(v) >= MinSecret {
				out = append(out, v)
			}
		}
	}
	walk(doc, false)
	return out
}
