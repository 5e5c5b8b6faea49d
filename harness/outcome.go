package harness

import (
	"encoding/json"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// Outcome is the stable, serializable verdict of a turn: what `outpost
// replay` and `outpost run --json` print last, and what batch results hold.
// Its JSON field names are a compatibility promise.
type Outcome struct {
	Type        string `json:"type"` // always "outcome"
	OK          bool   `json:"ok"`
	Class       string `json:"class"`
	Unavailable string `json:"unavailable"`
	Auth        string `json:"auth,omitempty"`
	// Budget names the caller's limit that stopped the turn ("cost",
	// "turns"); the class is then process.
	Budget string `json:"budget,omitempty"`
	// Limit names the sandbox's resource limit that stopped the CLI
	// ("memory", "pids"); the class is then process.
	Limit        string `json:"limit,omitempty"`
	ResetAt      string `json:"reset_at"`
	Conversation string `json:"conversation"`
	Text         string `json:"text"`
	// Value is a typed response's validated JSON value; Repaired says it
	// needed the repair turn.
	Value      json.RawMessage `json:"value,omitempty"`
	Repaired   bool            `json:"repaired,omitempty"`
	Usage      usage.Usage     `json:"usage"`
	Error      string          `json:"error,omitempty"`
	ExitCode   int             `json:"exit_code"`
	Agent      string          `json:"agent,omitempty"`
	CLIVersion string          `json:"cli_version,omitempty"`
	// Model is the model the turn ran, when known.
	Model string `json:"model,omitempty"`
	// SecretPrinted says the CLI printed a secret the lease holds, or
	// wrote one into the workspace's changes (replaced by [REDACTED] in
	// the text and everywhere else, masked in the patch).
	SecretPrinted bool `json:"secret_printed,omitempty"`
}

// Notes are the failure's qualifiers, as people read them: "unavailable:
// REASON", "auth: REASON", "limit: RESOURCE" and "resets TIME", in that order,
// each only when set.
func (o *Outcome) Notes() []string {
	var notes []string
	if o.Unavailable != "" {
		notes = append(notes, "unavailable: "+o.Unavailable)
	}
	if o.Auth != "" {
		notes = append(notes, "auth: "+o.Auth)
	}
	if o.Limit != "" {
		notes = append(notes, "limit: "+o.Limit)
	}
	if o.ResetAt != "" {
		notes = append(notes, "resets "+o.ResetAt)
	}
	return notes
}

// Outcome summarizes r.
func (r *Result) Outcome() Outcome {
	o := Outcome{
		Type: "outcome", OK: r.Err == nil, Conversation: r.Conversation, Text: r.Text,
		Usage: r.Usage, ExitCode: r.Exit.Code, Agent: r.Agent, CLIVersion: r.CLIVersion, Model: r.Model,
		Value: r.Value, Repaired: r.Repaired, SecretPrinted: r.SecretPrinted,
	}
	if r.Err != nil {
		o.Class = string(outposterr.ClassOf(r.Err))
		o.Unavailable = outposterr.UnavailableReason(r.Err)
		o.Auth = outposterr.AuthReason(r.Err)
		o.Budget = outposterr.BudgetReason(r.Err)
		o.Limit = outposterr.LimitReason(r.Err)
		o.Error = r.Err.Error()
		if t, ok := outposterr.ResetAt(r.Err); ok {
			o.ResetAt = t.UTC().Format(time.RFC3339)
		}
	}
	return o
}
