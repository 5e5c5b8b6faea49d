package driver

import (
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/reset"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// Adapter is a spec-defined driver. It is pure, as every adapter.
type Adapter struct {
	spec *Spec
}

var (
	_ adapters.Adapter    = (*Adapter)(nil)
	_ adapters.ExitMapper = (*Adapter)(nil)
	_ adapters.Declarer   = (*Adapter)(nil)
)

// DeclaredVars implements adapters.Declarer: the driver's secrets, which a
// project declares in .outpost/.env (outpost init lists them).
func (a *Adapter) DeclaredVars() []string { return append([]string(nil), a.spec.Secrets...) }

// New returns the adapter of a parsed spec.
func New(s *Spec) *Adapter { return &Adapter{spec: s} }

// Spec returns the driver's spec.
func (a *Adapter) Spec() *Spec { return a.spec }

// Name implements adapters.Adapter: the driver id.
func (a *Adapter) Name() string { return a.spec.ID }

// Binary implements adapters.Adapter.
func (a *Adapter) Binary() string { return a.spec.Binary }

// Capabilities implements adapters.Adapter: resumable when the driver uses
// ${input.conversation}; no fork, no live input; usage from events.
func (a *Adapter) Capabilities() adapters.Capabilities {
	mode := adapters.UsageUnavailable
	for _, r := range a.spec.Output.Rules {
		if r.Event == "usage" {
			mode = adapters.UsageEvents
		}
	}
	return adapters.Capabilities{Resumable: a.spec.resumable, RequiresFinished: a.spec.RequiresFinal, Usage: mode}
}

// Request implements adapters.Adapter: the templates filled from in.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	s := a.spec
	if err := in.ValidateFor(s.ID); err != nil {
		return sandbox.Command{}, err
	}
	if in.Fork {
		return sandbox.Command{}, cfgErr(s.ID, "a spec-defined driver cannot fork")
	}
	if len(in.MCP) > 0 {
		return sandbox.Command{}, cfgErr(s.ID, "a spec-defined driver takes no MCP servers")
	}
	inputs := map[string]string{"prompt": in.Prompt, "model": in.Model, "effort": in.Effort,
		"conversation": in.Continue, "workspace": in.Workdir, "home": in.Home}
	if in.Endpoint != nil {
		inputs["endpoint"] = in.Endpoint.BaseURL
	}
	args := []string{expand(s.Binary, inputs, nil)}
	for _, el := range s.Args {
		if !el.isGrp {
			args = append(args, expand(el.One, inputs, nil))
			continue
		}
		if emptyInput(el.Group, inputs) {
			continue
		}
		for _, p := range el.Group {
			args = append(args, expand(p, inputs, nil))
		}
	}
	env := map[string]string{}
	for k, v := range in.Env {
		env[k] = v
	}
	for k, v := range s.Env {
		for _, name := range secretsIn(v) {
			if in.Env[name] == "" {
				return sandbox.Command{}, cfgErr(s.ID, "secret %s is not set (declare it in .outpost/.env or forward it with --env %s)", name, name)
			}
		}
		env[k] = expand(v, inputs, in.Env)
	}
	dir := in.Workdir
	if s.Workdir != "" && dir != "" {
		dir = path.Join(dir, path.Clean(s.Workdir))
	}
	cmd := sandbox.Command{Args: args, Env: env, Dir: dir}
	if s.Stdin != "" {
		cmd.Stdin = []byte(expand(s.Stdin, inputs, nil))
	}
	return cmd, nil
}

func cfgErr(id, format string, args ...any) error {
	return outposterr.New(outposterr.Configuration, "%s: "+format, append([]any{id}, args...)...)
}

// expand fills ${input.X} from inputs and ${secrets.X} from secrets.
func expand(text string, inputs, secrets map[string]string) string {
	return templateRE.ReplaceAllStringFunc(text, func(m string) string {
		ns, name, _ := strings.Cut(m[2:len(m)-1], ".")
		if ns == "secrets" {
			return secrets[name]
		}
		return inputs[name]
	})
}

// emptyInput reports whether an ${input.…} in group is empty.
func emptyInput(group []string, inputs map[string]string) bool {
	for _, p := range group {
		for _, m := range templateRE.FindAllStringSubmatch(p, -1) {
			if ns, name, _ := strings.Cut(m[1], "."); ns == "input" && inputs[name] == "" {
				return true
			}
		}
	}
	return false
}

func secretsIn(text string) []string {
	var out []string
	for _, m := range templateRE.FindAllStringSubmatch(text, -1) {
		if ns, name, _ := strings.Cut(m[1], "."); ns == "secrets" {
			out = append(out, name)
		}
	}
	return out
}

// NewDecoder implements adapters.Adapter.
func (a *Adapter) NewDecoder() adapters.Decoder {
	if a.spec.Output.Mode == "text" {
		return textDecoder{}
	}
	return &jsonlDecoder{rules: a.spec.Output.Rules}
}

// textDecoder: every stdout line is answer text.
type textDecoder struct{}

func (textDecoder) Decode(b []byte) []adapters.Event {
	return []adapters.Event{{Kind: adapters.KindText, Text: strings.TrimRight(string(b), "\r")}}
}

// jsonlDecoder applies the rules to each JSON line.
type jsonlDecoder struct {
	rules []Rule
}

func (d *jsonlDecoder) Decode(b []byte) []adapters.Event {
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return []adapters.Event{adapters.RawEvent(b)}
	}
	var evs []adapters.Event
	for _, r := range d.rules {
		if !matches(obj, r.Match) {
			continue
		}
		evs = appendEvents(evs, obj, r)
	}
	if len(evs) == 0 {
		return []adapters.Event{adapters.RawEvent(b)}
	}
	return evs
}

// lookup follows a dotted path through nested objects.
func lookup(obj map[string]any, p string) (any, bool) {
	cur := obj
	for {
		k, rest, more := strings.Cut(p, ".")
		v, ok := cur[k]
		if !ok || !more {
			return v, ok
		}
		if cur, ok = v.(map[string]any); !ok {
			return nil, false
		}
		p = rest
	}
}

// text renders a value as text: strings as they are, numbers and booleans
// in JSON form; objects and arrays are not text.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func matches(obj map[string]any, match map[string]string) bool {
	for p, want := range match {
		v, ok := lookup(obj, p)
		if !ok {
			return false
		}
		if got, ok := text(v); !ok || got != want {
			return false
		}
	}
	return true
}

func field(obj map[string]any, r Rule, name string) (string, bool) {
	p, ok := r.Fields[name]
	if !ok {
		return "", false
	}
	v, ok := lookup(obj, p)
	if !ok {
		return "", false
	}
	return text(v)
}

func number(obj map[string]any, r Rule, name string) (float64, bool) {
	p, ok := r.Fields[name]
	if !ok {
		return 0, false
	}
	v, _ := lookup(obj, p)
	switch x := v.(type) {
	case float64:
		return x, x >= 0
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil && f >= 0
	}
	return 0, false
}

// appendEvents appends the events rule r makes of obj.
func appendEvents(evs []adapters.Event, obj map[string]any, r Rule) []adapters.Event {
	if r.Event == "final" {
		return appendFinal(evs, obj, r)
	}
	if ev, ok := event(obj, r); ok {
		return append(evs, ev)
	}
	return evs
}

// appendFinal appends a final rule's result (when it has text) and
// finished events.
func appendFinal(evs []adapters.Event, obj map[string]any, r Rule) []adapters.Event {
	ok := true
	if p, has := r.Fields["ok"]; has {
		v, found := lookup(obj, p)
		switch x := v.(type) {
		case bool:
			ok = x
		default:
			s, _ := text(v)
			ok = found && slices.Contains(r.OKValues, s)
		}
	}
	if t, has := field(obj, r, "text"); has && t != "" {
		evs = append(evs, adapters.Event{Kind: adapters.KindResult, Text: t})
	}
	return append(evs, adapters.FinishedEvent(ok, ""))
}

func event(obj map[string]any, r Rule) (adapters.Event, bool) {
	switch r.Event {
	case "conversation":
		id, _ := field(obj, r, "id")
		if !adapters.ValidID(id) {
			return adapters.Event{Kind: adapters.KindWarning, Text: "driver: conversation id " + strconv.Quote(adapters.Preview(id, 80)) + " is not a valid id; ignored"}, true
		}
		return adapters.Event{Kind: adapters.KindConversation, Conversation: id}, true
	case "text":
		t, ok := field(obj, r, "text")
		if !ok || t == "" {
			return adapters.Event{}, false
		}
		return adapters.Event{Kind: adapters.KindText, Text: t}, true
	case "tool":
		name, ok := field(obj, r, "name")
		if !ok || name == "" {
			return adapters.Event{}, false
		}
		call := &adapters.ToolCall{Name: name}
		call.CallID, _ = field(obj, r, "id")
		if p, ok := r.Fields["input"]; ok {
			if v, ok := lookup(obj, p); ok {
				call.Input, _ = json.Marshal(v)
			}
		}
		return adapters.Event{Kind: adapters.KindTool, Tool: call}, true
	case "usage":
		u := usage.Usage{}
		var seen bool
		for name, dst := range map[string]*int64{"input": &u.Input, "output": &u.Output, "cached": &u.Cached, "reasoning": &u.Reasoning} {
			if f, ok := number(obj, r, name); ok {
				*dst, seen = int64(f), true
			}
		}
		rep := usage.Report{Scope: usage.ScopeTurn, Usage: u}
		if f, ok := number(obj, r, "cost"); ok {
			rep.Usage.CostUSD, rep.HasCost, seen = f, true, true
			rep.Usage.CostKnown = true
		}
		if !seen {
			return adapters.Event{}, false
		}
		rep.Usage.Complete = true
		return adapters.Event{Kind: adapters.KindUsage, Usage: &rep}, true
	case "failure":
		t, ok := field(obj, r, "text")
		if !ok || t == "" {
			return adapters.Event{}, false
		}
		fd := &adapters.FailureDetail{}
		if st, ok := number(obj, r, "status"); ok {
			fd.Status = int(st)
		}
		return adapters.Event{Kind: adapters.KindFailure, Text: t, Failure: fd}, true
	}
	return adapters.Event{}, false
}

// Quota implements adapters.Adapter with the spec's quota patterns; a
// "reset" group is parsed into an instant.
func (a *Adapter) Quota(txt string, at time.Time) (bool, time.Time) {
	for _, re := range a.spec.compiled.quota {
		m := re.FindStringSubmatch(txt)
		if m == nil {
			continue
		}
		if i := re.SubexpIndex("reset"); i > 0 && m[i] != "" {
			if t, ok := reset.Parse(m[i], at); ok {
				return true, t
			}
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(m[i])); err == nil {
				return true, t
			}
		}
		return true, time.Time{}
	}
	return false, time.Time{}
}

// Unavailable implements adapters.Adapter with the spec's patterns.
func (a *Adapter) Unavailable(txt string) (string, bool) {
	for _, re := range a.spec.compiled.unavailable {
		if m := re.FindString(txt); m != "" {
			return adapters.Preview(m, 80), true
		}
	}
	return "", false
}

// Auth implements adapters.Adapter with the spec's patterns.
func (a *Adapter) Auth(txt string) (string, bool) {
	for _, re := range a.spec.compiled.auth {
		if m := re.FindString(txt); m != "" {
			return adapters.Preview(m, 80), true
		}
	}
	return "", false
}

// ExitMeaning implements adapters.ExitMapper from failures.exit_codes.
func (a *Adapter) ExitMeaning(code int) string {
	return a.spec.compiled.exit[code]
}
