package copilot

import (
	"bytes"
	"encoding/json"
	"path"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

var _ adapters.Storage = (*Adapter)(nil)

// SessionDir returns the home-relative directory of session id.
func SessionDir(id string) string { return path.Join(".copilot", "session-state", id) }

// ConversationPaths implements [adapters.Storage]: the session directory
// .copilot/session-state/<id> (events.jsonl, workspace.yaml, checkpoints,
// files). session-store.db is not carried: on 1.0.102 a directory restored
// into a fresh home resumes without it (verified), and the database holds
// every session of the home, not just this one.
func (a *Adapter) ConversationPaths(id, cwd string) []string {
	return []string{SessionDir(id)}
}

// Relocate implements [adapters.Storage]: in workspace.yaml the `cwd:` and
// `git_root:` lines equal to the old directory, and in events.jsonl the
// "cwd"/"gitRoot" fields equal to it (the session.start and session.resume
// context) are rewritten for the new directory. Paths do not change.
func (a *Adapter) Relocate(p string, content []byte, oldCwd, newCwd string) (string, []byte) {
	if oldCwd == newCwd || oldCwd == "" || newCwd == "" {
		return p, content
	}
	switch path.Base(p) {
	case "workspace.yaml":
		var out bytes.Buffer
		for _, l := range strings.SplitAfter(string(content), "\n") {
			body := strings.TrimRight(l, "\r\n")
			nl := l[len(body):]
			for _, key := range []string{"cwd", "git_root"} {
				v, ok := strings.CutPrefix(body, key+":")
				if !ok {
					continue
				}
				if unquoteYAML(strings.TrimSpace(v)) == oldCwd {
					body = key + ": " + quoteYAML(newCwd)
				}
			}
			out.WriteString(body + nl)
		}
		return p, out.Bytes()
	case "events.jsonl":
		return p, adapters.RelocateJSON(content, oldCwd, newCwd, "cwd", "gitRoot")
	}
	return p, content
}

// unquoteYAML reads a plain, single- or double-quoted YAML scalar.
func unquoteYAML(v string) string {
	switch {
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		if s, err := strconv.Unquote(v); err == nil {
			return s
		}
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	return v
}

// quoteYAML writes a path plain when that is safe, else double-quoted.
func quoteYAML(v string) string {
	plain := v != "" && !strings.ContainsAny(v, ":#'\"\\\n\t{}[],&*!|>%@`") && strings.TrimSpace(v) == v
	if plain {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// MaxSessionUsageBytes bounds what [SessionUsageCommand] reads.
const MaxSessionUsageBytes = 8 << 20

// SessionUsageCommand is the bounded read-only command that prints the
// tail of session id's events.jsonl in a sandbox whose CLI home is home,
// for [ParseSessionUsage] after the turn exits.
func SessionUsageCommand(home, id string) (sandbox.Command, bool) {
	if !adapters.ValidID(id) || home == "" {
		return sandbox.Command{}, false
	}
	file := path.Join(home, SessionDir(id), "events.jsonl")
	return sandbox.Command{Args: []string{"tail", "-c", strconv.Itoa(MaxSessionUsageBytes), file}}, true
}

// ParseSessionUsage reads the usage of the last process that wrote to a
// session's events.jsonl (the turn that just ran): the sum of the
// session.usage_record lines after the last session.start or
// session.resume, one per model call (de-duplicated by usageId). Complete is
// false when the segment start was not seen (a truncated read) or a record
// lacks its counters. ok is false when no record was found.
func ParseSessionUsage(events []byte) (usage.Report, bool) {
	var total usage.Usage
	complete, started, found := true, false, false
	seen := map[string]bool{}
	for l := range bytes.Lines(events) {
		if !bytes.Contains(l, []byte(`"session.`)) {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Usage *struct {
					tokenCounts
					APICallID  string `json:"apiCallId"`
					Accounting struct {
						UsageID string `json:"usageId"`
					} `json:"accounting"`
				} `json:"usage"`
			} `json:"data"`
		}
		if json.Unmarshal(l, &ev) != nil {
			continue
		}
		switch ev.Type {
		case "session.start", "session.resume":
			total, complete, started, found = usage.Usage{}, true, true, false
			clear(seen)
		case "session.usage_record":
			u := ev.Data.Usage
			if u == nil {
				complete = false
				continue
			}
			id := u.Accounting.UsageID
			if id == "" {
				id = u.APICallID
			}
			if id != "" {
				if seen[id] {
					continue
				}
				seen[id] = true
			}
			cu := u.tokenCounts.usage()
			if !cu.Complete {
				complete = false
			}
			cu.Complete = true
			total = total.Add(cu)
			found = true
		}
	}
	if !found {
		return usage.Report{}, false
	}
	total.Complete = complete && started
	return usage.Report{Scope: usage.ScopeTurn, Usage: total}, true
}

var _ adapters.SessionUsage = (*Adapter)(nil)

// SessionUsageCommand implements [adapters.SessionUsage].
func (a *Adapter) SessionUsageCommand(home, id string) (sandbox.Command, bool) {
	return SessionUsageCommand(home, id)
}

// ParseSessionUsage implements [adapters.SessionUsage].
func (a *Adapter) ParseSessionUsage(out []byte) (usage.Report, bool) { return ParseSessionUsage(out) }
