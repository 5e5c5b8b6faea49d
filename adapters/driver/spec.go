// Package driver builds an adapter from a spec file, for agent CLIs Outpost
// ships no adapter for (Gemini CLI, OpenCode, Aider, in-house tools). A
// spec-defined driver runs on the same turn engine as the built-in adapters,
// so it gets deadlines, process-group kill, classification, usage, sandboxes
// and conversation ids for free.
//
// A driver is one JSON file, .outpost/drivers/<id>.json (JSON only: one
// format, no YAML). Unknown fields are refused, so a typo is an error:
//
//	{
//	  "id": "mycli",
//	  "binary": "mycli",
//	  "args": ["--print", ["--model", "${input.model}"], ["--resume", "${input.conversation}"]],
//	  "stdin": "${input.prompt}",
//	  "env": {"MYCLI_API_KEY": "${secrets.MYCLI_API_KEY}", "MYCLI_COLOR": "never"},
//	  "secrets": ["MYCLI_API_KEY"],
//	  "workdir": ".",
//	  "output": {"mode": "jsonl", "rules": [
//	    {"match": {"type": "init"}, "event": "conversation", "fields": {"id": "session_id"}},
//	    {"match": {"type": "message"}, "event": "text", "fields": {"text": "content"}},
//	    {"match": {"type": "tool"}, "event": "tool", "fields": {"name": "name", "input": "args", "id": "call_id"}},
//	    {"match": {"type": "done"}, "event": "usage", "fields": {"input": "usage.input", "output": "usage.output"}},
//	    {"match": {"type": "done"}, "event": "final", "fields": {"text": "answer", "ok": "status"}, "ok_values": ["success"]},
//	    {"match": {"type": "error"}, "event": "failure", "fields": {"text": "message", "status": "code"}}
//	  ]},
//	  "failures": {
//	    "exit_codes": {"3": "quota", "4": "unavailable", "5": "auth"},
//	    "quota": ["(?i)rate limit.*resets? (?P<reset>.+)$", "(?i)quota exceeded"],
//	    "unavailable": ["(?i)overloaded", "(?i)\\b503\\b"],
//	    "auth": ["(?i)invalid api key"]
//	  }
//	}
//
// Templates. ${input.NAME} is one of the turn's inputs: prompt, model,
// effort, conversation (the id to continue), workspace (the working
// directory inside the sandbox), home and endpoint (the base URL of a custom
// model endpoint: with outpost run --offline, the scripted model server). ${secrets.NAME} is a declared
// secret (listed in "secrets"), whose value comes from the turn's declared
// variables (.outpost/.env, --env). A secret may appear only in "env": in
// argv it would be visible to every process on the host, so a spec that
// puts one in args, stdin, binary or workdir is refused when it loads.
//
// Args are strings or groups (arrays of strings). A group is left out when
// an ${input.…} in it is empty — ["--model", "${input.model}"] only when a
// model is set. A driver whose args or stdin use ${input.conversation} can
// continue conversations.
//
// Workdir resolves against the project root (the sandbox's workspace) and
// is refused if it escapes it, also through a symlink.
//
// Output: "text" (every stdout line is answer text; success is exit 0) or
// "jsonl": every stdout line is a JSON object, and each rule whose "match"
// fields all equal the line's values (dotted paths, compared as text) turns
// it into an event: conversation (id), text (text), tool (name, input, id),
// usage (input, output, cached, reasoning, cost), final (text, ok: a boolean
// field or one whose text is in "ok_values"; no ok field: ok) or failure
// (text, status). A line no rule matches is kept as a raw event. With
// "requires_final", a turn without a successful final event failed.
//
// Failures: "exit_codes" maps an exit code to quota, unavailable, auth,
// session or process; "quota", "unavailable" and "auth" are regular
// expressions (RE2) matched against failure events and stderr lines; a
// quota pattern's named group "reset" is parsed as the reset time
// ("try again in 2 hours", "at 3pm (UTC)", an RFC 3339 stamp, …).
package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// MaxSpecBytes bounds a driver file.
const MaxSpecBytes = 256 << 10

// Inputs are the names ${input.NAME} may use.
var Inputs = []string{"prompt", "model", "effort", "conversation", "workspace", "home", "endpoint"}

// Events are the event names a jsonl rule may produce, with their fields.
var Events = map[string][]string{
	"conversation": {"id"},
	"text":         {"text"},
	"tool":         {"name", "input", "id"},
	"usage":        {"input", "output", "cached", "reasoning", "cost"},
	"final":        {"text", "ok"},
	"failure":      {"text", "status"},
}

// Classes are the failure classes an exit code may map to.
var Classes = []string{"quota", "unavailable", "auth", "session", "process"}

// Spec is a parsed, validated driver file.
type Spec struct {
	ID            string            `json:"id"`
	Description   string            `json:"description,omitempty"`
	Binary        string            `json:"binary"`
	Args          []Arg             `json:"args,omitempty"`
	Stdin         string            `json:"stdin,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Secrets       []string          `json:"secrets,omitempty"`
	Workdir       string            `json:"workdir,omitempty"`
	Output        Output            `json:"output"`
	Failures      Failures          `json:"failures,omitempty"`
	RequiresFinal bool              `json:"requires_final,omitempty"`
	compiled      compiled
	resumable     bool
}

// Arg is one argv element or a group of them.
type Arg struct {
	Group []string
	One   string
	isGrp bool
}

// UnmarshalJSON takes a string or an array of strings.
func (a *Arg) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		a.isGrp = true
		if err := json.Unmarshal(b, &a.Group); err != nil {
			return fmt.Errorf("an args group is an array of strings")
		}
		return nil
	}
	if err := json.Unmarshal(b, &a.One); err != nil {
		return fmt.Errorf("an args element is a string or an array of strings")
	}
	return nil
}

// MarshalJSON writes the string or the group.
func (a Arg) MarshalJSON() ([]byte, error) {
	if a.isGrp {
		return json.Marshal(a.Group)
	}
	return json.Marshal(a.One)
}

// parts lists the strings of the element.
func (a Arg) parts() []string {
	if a.isGrp {
		return a.Group
	}
	return []string{a.One}
}

// Output says how stdout becomes events.
type Output struct {
	Mode  string `json:"mode"`
	Rules []Rule `json:"rules,omitempty"`
}

// Rule maps matching JSON lines to one event.
type Rule struct {
	Match    map[string]string `json:"match"`
	Event    string            `json:"event"`
	Fields   map[string]string `json:"fields"`
	OKValues []string          `json:"ok_values,omitempty"`
}

// Failures maps exit codes and texts to failure classes.
type Failures struct {
	ExitCodes   map[string]string `json:"exit_codes,omitempty"`
	Quota       []string          `json:"quota,omitempty"`
	Unavailable []string          `json:"unavailable,omitempty"`
	Auth        []string          `json:"auth,omitempty"`
}

type compiled struct {
	exit        map[int]string
	quota       []*regexp.Regexp
	unavailable []*regexp.Regexp
	auth        []*regexp.Regexp
}

var (
	idRE       = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	templateRE = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// specError is a configuration error naming the driver file.
func specError(where, format string, args ...any) error {
	return outposterr.New(outposterr.Configuration, "driver %s: "+format, append([]any{where}, args...)...)
}

// Parse parses and validates a driver file's content; where names it in
// errors (its path). It is pure: the workdir is checked against a project
// root by [Spec.CheckWorkdir].
func Parse(data []byte, where string) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, specError(where, "file is over %d bytes", MaxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, specError(where, "not a valid driver file: %v", err)
	}
	if dec.More() {
		return nil, specError(where, "more than one JSON value")
	}
	if err := s.validate(); err != nil {
		return nil, specError(where, "%v", err)
	}
	return &s, nil
}

func (s *Spec) validate() error {
	if !idRE.MatchString(s.ID) {
		return fmt.Errorf("id %q must be 1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit", s.ID)
	}
	if strings.TrimSpace(s.Binary) == "" {
		return fmt.Errorf("binary is required")
	}
	secrets := map[string]bool{}
	for _, n := range s.Secrets {
		if !sandbox.ValidEnvName(n) {
			return fmt.Errorf("secret name %q is not a valid variable name", n)
		}
		secrets[n] = true
	}
	// Secrets only in env: argv is visible to every process on the host.
	if err := checkTemplates("binary", s.Binary, secrets, false); err != nil {
		return err
	}
	for i, a := range s.Args {
		if a.isGrp && len(a.Group) == 0 {
			return fmt.Errorf("args[%d] is an empty group", i)
		}
		for _, p := range a.parts() {
			if err := checkTemplates(fmt.Sprintf("args[%d]", i), p, secrets, false); err != nil {
				return err
			}
			if strings.Contains(p, "${input.conversation}") {
				s.resumable = true
			}
		}
	}
	if err := checkTemplates("stdin", s.Stdin, secrets, false); err != nil {
		return err
	}
	if strings.Contains(s.Stdin, "${input.conversation}") {
		s.resumable = true
	}
	if err := checkTemplates("workdir", s.Workdir, secrets, false); err != nil {
		return err
	}
	if strings.Contains(s.Workdir, "${") {
		return fmt.Errorf("workdir takes no templates")
	}
	for k, v := range s.Env {
		if !sandbox.ValidEnvName(k) {
			return fmt.Errorf("env name %q is not a valid variable name", k)
		}
		if err := checkTemplates("env."+k, v, secrets, true); err != nil {
			return err
		}
	}
	if s.Workdir != "" && !filepath.IsLocal(filepath.FromSlash(s.Workdir)) && filepath.Clean(s.Workdir) != "." {
		return fmt.Errorf("workdir %q is outside the project root (it must be a relative path inside it)", s.Workdir)
	}
	if err := s.validateOutput(); err != nil {
		return err
	}
	return s.compileFailures()
}

// checkTemplates checks every ${…} in text: a known input, or a declared
// secret where secrets are allowed.
func checkTemplates(field, text string, secrets map[string]bool, secretsOK bool) error {
	if strings.Count(text, "${") != len(templateRE.FindAllString(text, -1)) {
		return fmt.Errorf("%s: unterminated ${ in %q", field, text)
	}
	for _, m := range templateRE.FindAllStringSubmatch(text, -1) {
		ns, name, ok := strings.Cut(m[1], ".")
		switch {
		case !ok:
			return fmt.Errorf("%s: template ${%s} must be ${input.NAME} or ${secrets.NAME}", field, m[1])
		case ns == "input":
			if !slices.Contains(Inputs, name) {
				return fmt.Errorf("%s: unknown input %q (inputs: %s)", field, name, strings.Join(Inputs, ", "))
			}
		case ns == "secrets":
			if !secretsOK {
				return fmt.Errorf("%s: secret %s refused: secrets may appear only in env, never in argv, stdin or paths (argv is visible to every process on the host)", field, name)
			}
			if !secrets[name] {
				return fmt.Errorf("%s: secret %s is not declared in \"secrets\"", field, name)
			}
		default:
			return fmt.Errorf("%s: template ${%s} must be ${input.NAME} or ${secrets.NAME}", field, m[1])
		}
	}
	return nil
}

func (s *Spec) validateOutput() error {
	switch s.Output.Mode {
	case "text":
		if len(s.Output.Rules) > 0 {
			return fmt.Errorf("output: text mode takes no rules")
		}
		if s.RequiresFinal {
			return fmt.Errorf("requires_final needs jsonl output (text output has no final event)")
		}
	case "jsonl":
		if len(s.Output.Rules) == 0 {
			return fmt.Errorf("output: jsonl mode needs at least one rule")
		}
		for i, r := range s.Output.Rules {
			fields, ok := Events[r.Event]
			if !ok {
				return fmt.Errorf("output.rules[%d]: unknown event %q (events: conversation, text, tool, usage, final, failure)", i, r.Event)
			}
			if len(r.Match) == 0 {
				return fmt.Errorf("output.rules[%d]: match is required (the fields a line must have)", i)
			}
			for f, p := range r.Fields {
				if !slices.Contains(fields, f) {
					return fmt.Errorf("output.rules[%d]: event %s has no field %q (fields: %s)", i, r.Event, f, strings.Join(fields, ", "))
				}
				if p == "" {
					return fmt.Errorf("output.rules[%d]: field %s has an empty path", i, f)
				}
			}
			if len(r.OKValues) > 0 && r.Event != "final" {
				return fmt.Errorf("output.rules[%d]: ok_values belongs to final rules", i)
			}
			switch r.Event {
			case "conversation":
				if r.Fields["id"] == "" {
					return fmt.Errorf("output.rules[%d]: a conversation rule needs fields.id", i)
				}
			case "text", "failure":
				if r.Fields["text"] == "" {
					return fmt.Errorf("output.rules[%d]: a %s rule needs fields.text", i, r.Event)
				}
			case "tool":
				if r.Fields["name"] == "" {
					return fmt.Errorf("output.rules[%d]: a tool rule needs fields.name", i)
				}
			}
		}
	case "":
		return fmt.Errorf("output.mode is required (text or jsonl)")
	default:
		return fmt.Errorf("output.mode %q must be text or jsonl", s.Output.Mode)
	}
	return nil
}

func (s *Spec) compileFailures() error {
	s.compiled.exit = map[int]string{}
	for k, v := range s.Failures.ExitCodes {
		code, err := strconv.Atoi(k)
		if err != nil || code < 1 || code > 255 {
			return fmt.Errorf("failures.exit_codes: %q is not an exit code (1-255)", k)
		}
		if !slices.Contains(Classes, v) {
			return fmt.Errorf("failures.exit_codes.%s: unknown class %q (classes: %s)", k, v, strings.Join(Classes, ", "))
		}
		s.compiled.exit[code] = v
	}
	compile := func(field string, pats []string) ([]*regexp.Regexp, error) {
		var out []*regexp.Regexp
		for i, p := range pats {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("failures.%s[%d]: %w", field, i, err)
			}
			if field != "quota" && slices.Contains(re.SubexpNames(), "reset") {
				return nil, fmt.Errorf("failures.%s[%d]: a reset group belongs to quota patterns", field, i)
			}
			out = append(out, re)
		}
		return out, nil
	}
	var err error
	if s.compiled.quota, err = compile("quota", s.Failures.Quota); err != nil {
		return err
	}
	if s.compiled.unavailable, err = compile("unavailable", s.Failures.Unavailable); err != nil {
		return err
	}
	s.compiled.auth, err = compile("auth", s.Failures.Auth)
	return err
}

// CheckWorkdir refuses a workdir that escapes the project root on disk
// (through a symlink); a workdir that does not exist yet is accepted here
// and fails when the CLI starts.
func (s *Spec) CheckWorkdir(root string) error {
	if err := s.checkWorkdir(root); err != nil {
		return specError(s.ID, "%v", err)
	}
	return nil
}

func (s *Spec) checkWorkdir(root string) error {
	if s.Workdir == "" {
		return nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("project root %s: %w", root, err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(s.Workdir)))
	if err != nil {
		return nil
	}
	if rel, err := filepath.Rel(realRoot, dir); err != nil || !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("workdir %q resolves to %s, outside the project root %s", s.Workdir, dir, realRoot)
	}
	return nil
}

// Dir is where driver files live, relative to the project root.
const Dir = ".outpost/drivers"

// File is one driver file of a project: its spec, or why it did not load.
type File struct {
	Path string
	Spec *Spec
	Err  error
}

// LoadDir loads every *.json file under root/.outpost/drivers, checking
// each workdir against root; a file's id must match its name (mycli.json
// holds "mycli"). A missing directory holds no drivers; the error is only
// for a directory that cannot be read (or is reached through a link). Each
// file's own problem is in its File.Err, so one bad file hides no other.
// Driver files are read as [Load] reads them.
func LoadDir(root string) ([]File, error) {
	dir := filepath.Join(root, filepath.FromSlash(Dir))
	d, err := openDir(root, "read "+dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fh, err := d.Open(".")
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read %s", dir)
	}
	names, err := fh.Readdirnames(-1)
	fh.Close()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read %s", dir)
	}
	sort.Strings(names)
	var files []File
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		if fi, err := d.Lstat(name); err == nil && fi.IsDir() {
			continue
		}
		f := File{Path: filepath.Join(dir, name)}
		f.Spec, f.Err = loadIn(d, name, root)
		files = append(files, f)
	}
	return files, nil
}

// Load loads the driver name from root/.outpost/drivers/<name>.json. The
// file is project configuration an agent or a repository may have planted:
// no component below root may be a link, and it must be a regular file
// owned by the user (or root) and writable by no one else. A missing file
// is an error wrapping fs.ErrNotExist.
func Load(root, name string) (*Spec, error) {
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("driver name %q: %w", name, fs.ErrNotExist)
	}
	d, err := openDir(root, "driver "+name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return loadIn(d, name+".json", root)
}

// openDir opens root's drivers directory, no component of which may be a
// link. A missing directory is an error wrapping fs.ErrNotExist; any other
// failure is a configuration error about what.
func openDir(root, what string) (*os.Root, error) {
	d, err := safefs.OpenDir(root, filepath.FromSlash(Dir), false)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s", what)
	}
	return d, err
}

// loadIn loads the driver file name of the drivers directory d.
func loadIn(d *os.Root, name, root string) (*Spec, error) {
	where := filepath.Join(d.Name(), name)
	f, fi, err := safefs.OpenIn(d, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		err = safefs.CheckOwner(where, fi)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, outposterr.Wrap(outposterr.Configuration, err, "refusing driver %s", where)
	}
	defer f.Close()
	data, err := safefs.ReadAllMax(f, MaxSpecBytes)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "driver %s", where)
	}
	return parseFile(data, where, root)
}

// LoadFile loads one driver file and checks its workdir against root.
func LoadFile(path, root string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "driver %s", path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "driver %s", path)
	}
	return parseFile(data, path, root)
}

// parseFile parses the driver file path and checks its name and workdir.
func parseFile(data []byte, path, root string) (*Spec, error) {
	s, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".json"); s.ID != want {
		return nil, specError(path, "id %q must match the file name (%s.json)", s.ID, s.ID)
	}
	if err := s.checkWorkdir(root); err != nil {
		return nil, specError(path, "%v", err)
	}
	return s, nil
}
