// Package credentials plans how an agent CLI authenticates and is
// configured inside a sandbox. Planning is pure: values in, a [Plan] out — no
// disk, no network, no environment reads (a test enforces that this package
// imports nothing that could). The effects — reading host files safely,
// writing them into a sandbox with private modes, running login commands,
// writing rotated tokens back — live in package credentials/install.
//
// Authentication is always chosen by the caller, never guessed and never
// read from a system keychain: [Auth] names a form (account or usage) and,
// where a CLI offers both, the variant (a host file or a variable). A
// missing credential is a configuration error naming the file or variable
// and the command that creates it.
package credentials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// Form is a way of authenticating.
type Form string

const (
	// None passes no credential (a local endpoint with a placeholder key).
	None Form = "none"
	// Account is the user's subscription login: a host login file or an
	// account token variable.
	Account Form = "account"
	// Usage is pay-per-use: an API key.
	Usage Form = "usage"
)

// Source selects the variant of a form.
type Source string

const (
	// SourceDefault lets the adapter pick its documented default variant.
	SourceDefault Source = ""
	// SourceFile reads the CLI's host login file.
	SourceFile Source = "file"
	// SourceVariable reads a variable.
	SourceVariable Source = "variable"
)

// Auth is the caller's explicit authentication choice.
type Auth struct {
	Form   Form
	Source Source
}

// ParseAuth parses "account", "account:file", "account:variable", "usage" or "none".
func ParseAuth(s string) (Auth, error) {
	form, src, _ := strings.Cut(strings.TrimSpace(s), ":")
	a := Auth{Form: Form(form), Source: Source(src)}
	switch a.Form {
	case None, Account, Usage:
	default:
		return Auth{}, outposterr.New(outposterr.Configuration, "unknown authentication form %q (account, account:file, account:variable, usage or none)", s)
	}
	switch a.Source {
	case SourceDefault, SourceFile, SourceVariable:
	default:
		return Auth{}, outposterr.New(outposterr.Configuration, "unknown credential source %q (file or variable)", src)
	}
	return a, nil
}

// String renders the choice as ParseAuth reads it.
func (a Auth) String() string {
	if a.Source == SourceDefault {
		return string(a.Form)
	}
	return string(a.Form) + ":" + string(a.Source)
}

// Plan is how one CLI authenticates in a sandbox.
type Plan struct {
	// Env is set in the CLI's environment (credential values included:
	// they travel only through the exec environment, never argv).
	Env map[string]string
	// Strip lists variables that must not reach the CLI even if the caller
	// forwards them (an API key on an account run silently wins over it).
	Strip []string
	// Files are host files copied into the sandbox's private home.
	Files []HostFile
	// Generated are files created in the sandbox's private home.
	Generated []Generated
	// Logins run inside the sandbox after the files are in place.
	Logins []Login
	// Bridge, when set, says the credential can stay outside the sandbox:
	// a model gateway holds it and the CLI gets a placeholder that is
	// useless anywhere else (package gateway). Forms a CLI must refresh
	// itself (login files) have none.
	Bridge *Bridge
}

// Bridge describes a credential a model gateway can hold for the CLI.
type Bridge struct {
	// Var is the variable the plan would set with the secret.
	Var string
	// Secret is its value.
	Secret string
	// Scheme is how the gateway presents it upstream: "x-api-key",
	// "bearer" or "claude-oauth" (gateway.Scheme values).
	Scheme string
	// Upstream is the model API's base URL the gateway forwards to.
	Upstream string
	// OAuth says the CLI presents the placeholder as a subscription token
	// (Endpoint.OAuthToken) rather than an API key.
	OAuth bool
	// Strip lists further variables that must not reach the CLI when
	// bridged (a custom base URL the gateway now stands for).
	Strip []string
}

// Bridged is the plan without its bridged credential: the secret is not
// set (and stripped if the caller forwards it), and the logins that would
// use it inside the sandbox are dropped.
func (p Plan) Bridged() Plan {
	if p.Bridge == nil {
		return p
	}
	env := map[string]string{}
	for k, v := range p.Env {
		if k != p.Bridge.Var {
			env[k] = v
		}
	}
	strip := append(append(append([]string(nil), p.Strip...), p.Bridge.Var), p.Bridge.Strip...)
	return Plan{Env: env, Strip: strip, Files: p.Files, Generated: p.Generated}
}

// Projection turns a host file's content into what the sandbox receives.
type Projection func(content []byte) ([]byte, error)

// HostFile is a credential file read from the host.
type HostFile struct {
	// Path is relative to the host home directory (".claude/.credentials.json").
	Path string
	// RelocateVar names a variable whose value, when set, replaces the
	// directory holding Path's first element (CLAUDE_CONFIG_DIR, CODEX_HOME).
	RelocateVar string
	// Project, when set, reduces the content (keep only the OAuth object).
	Project Projection
	// Dest is the destination relative to the sandbox home; empty when the
	// content is delivered as DestVar instead.
	Dest string
	// DestVar delivers the (projected) content as this variable.
	DestVar string
	// Rotates marks a refreshable login that the CLI may rewrite in the
	// sandbox; Fresher and Merge decide the write-back.
	Rotates bool
	// Fresher reports whether the sandbox copy holds a newer, valid login
	// than the host file.
	Fresher func(host, sandbox []byte) bool
	// Merge returns the new host content from the host file and the newer
	// sandbox copy (keeping what the projection dropped). Nil: the sandbox copy.
	Merge func(host, sandbox []byte) ([]byte, error)
	// Exclusive marks a login that must not be handed to two sandboxes at
	// once (a single-use refresh token: the second refresh invalidates the
	// first copy). Materialization refuses a second concurrent use unless
	// the caller opts in.
	Exclusive bool
	// Login is the command that creates the file, for error messages.
	Login string
	// Alternative names another way to authenticate, for error messages.
	Alternative string
}

// HostPath returns where the file lives on a host whose home is home, given
// the relocation variable's value (empty: not set).
func (f HostFile) HostPath(home, relocate string) string {
	if f.RelocateVar != "" && relocate != "" {
		rest := f.Path
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i+1:]
		}
		return path.Join(relocate, rest)
	}
	return path.Join(home, f.Path)
}

// Generated is a file created in the sandbox home.
type Generated struct {
	Dest    string
	Content []byte
}

// Login is a command run inside the sandbox, with a secret on stdin.
type Login struct {
	Args []string
	// StdinVar names the Plan.Env variable whose value is written to stdin.
	StdinVar string
}

// ConfigPlan is configuration merged into CLI config files in the sandbox.
type ConfigPlan struct {
	Files []ConfigFile
}

// ConfigFile merges Entries into the JSON object at Section of the file
// Dest (relative to the sandbox home), creating what is missing.
type ConfigFile struct {
	Dest    string
	Section []string
	Entries map[string]any
}

// Missing is the error for an absent credential variable.
func Missing(agent, name, how string) error {
	msg := fmt.Sprintf("%s: missing %s. Declare the selected credential explicitly (in .outpost/.env, or forward it with --env %s)", agent, name, name)
	if how != "" {
		msg += "; " + how
	}
	return outposterr.New(outposterr.Configuration, "%s", msg)
}

// Unsupported is the error for a form a CLI does not offer.
func Unsupported(agent string, a Auth, accepted ...string) error {
	return outposterr.New(outposterr.Configuration, "%s does not support %s authentication. Accepted forms: %s",
		agent, a, strings.Join(accepted, ", "))
}

// Var returns vars[name] trimmed, and whether it is set and non-empty.
func Var(vars map[string]string, name string) (string, bool) {
	v := strings.TrimSpace(vars[name])
	return v, v != ""
}

// MergeJSON merges entries into the object at section of the JSON document
// existing (empty: a new document) and returns the indented result. Objects
// along the section path are created; a non-object in the way is an error.
func MergeJSON(existing []byte, section []string, entries map[string]any) ([]byte, error) {
	root := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := json.Unmarshal(existing, &root); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "config file is not a JSON object")
		}
	}
	obj := root
	for _, key := range section {
		next, ok := obj[key]
		if !ok || next == nil {
			m := map[string]any{}
			obj[key] = m
			obj = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, outposterr.New(outposterr.Configuration, "config section %q is not an object", strings.Join(section, "."))
		}
		obj = m
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		obj[k] = entries[k]
	}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "encode config")
	}
	return append(out, '\n'), nil
}

// ValidDest reports whether p is a safe home-relative destination: relative,
// clean, no "..".
func ValidDest(p string) bool {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return false
		}
	}
	return true
}

// Declared resolves the variables a project declares (the names in
// .outpost/.env) against the process environment: a declaration with a value
// is used as is; an empty declaration inherits the process value (absent if
// unset). A name given a value by the file AND present in the process
// environment is an error, never a silent override. forwarded lists names
// forwarded explicitly from the process (--env); they count as the process
// source. A name that is not a variable name, or is [Reserved] (relocation
// being the CLIs' relocation variables), is a configuration error; so is a
// value no environment can carry (a NUL byte) or one over [MaxVarBytes].
// Errors name variables, never values.
func Declared(file map[string]string, process func(string) (string, bool), forwarded, relocation []string) (map[string]string, error) {
	names := make([]string, 0, len(file)+len(forwarded))
	for name := range file {
		names = append(names, name)
	}
	names = append(names, forwarded...)
	sort.Strings(names)
	for _, name := range names {
		switch {
		case !envName.MatchString(name):
			return nil, outposterr.New(outposterr.Configuration, "%q is not a variable name (letters, digits and '_', not starting with a digit)", name)
		case Reserved(name, relocation...):
			return nil, outposterr.New(outposterr.Configuration,
				"%s is reserved: Outpost or the sandbox sets it for every CLI, or it would move the CLI's files or load other code; remove it", name)
		}
	}
	out := map[string]string{}
	fromFile := map[string]bool{}
	var conflicts []string
	for name, v := range file {
		pv, inProcess := process(name)
		switch {
		case v == "":
			if inProcess && pv != "" {
				out[name] = pv
			}
		case inProcess && pv != "" && pv != v:
			conflicts = append(conflicts, name)
		default:
			out[name] = v
			fromFile[name] = true
		}
	}
	for _, name := range forwarded {
		if v, ok := file[name]; ok && v != "" {
			conflicts = append(conflicts, name)
			continue
		}
		pv, ok := process(name)
		if !ok || pv == "" {
			return nil, outposterr.New(outposterr.Configuration, "--env %s: the variable is not set", name)
		}
		out[name] = pv
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return nil, outposterr.New(outposterr.Configuration,
			"%s set both in .outpost/.env and in the environment; remove one (Outpost never picks one silently)",
			strings.Join(dedupe(conflicts), ", "))
	}
	for _, name := range names {
		if v, ok := out[name]; ok {
			where := name + " (from the environment)"
			if fromFile[name] {
				where = name + " in .outpost/.env"
			}
			if err := CheckVarValue(where, v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// MaxVarBytes bounds one variable's value: far above any key or token, and
// below what one environment string may hold (Linux refuses an exec with a
// string over 128 KiB, and the CLI would "not run").
const MaxVarBytes = 64 << 10

// CheckVarValue refuses a value for name that no process environment can
// carry: a NUL byte, or more than [MaxVarBytes]. The error names the
// variable, never the value.
func CheckVarValue(name, v string) error {
	switch {
	case strings.ContainsRune(v, 0):
		return outposterr.New(outposterr.Configuration, "%s: the value contains a NUL byte, which no environment can carry", name)
	case len(v) > MaxVarBytes:
		return outposterr.New(outposterr.Configuration, "%s: the value is %d KiB, more than the %d KiB a variable may hold", name, len(v)>>10, MaxVarBytes>>10)
	}
	return nil
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
