// Package atif exports the attempts of an Outpost run directory (package
// runrec) as ATIF, the Agent Trajectory Interchange Format, version 1.7
// (Harbor's rfcs/0001-trajectory-format.md), so trajectory viewers and
// analysis tools that read ATIF open Outpost's runs.
//
// One attempt (one turn of a job) becomes one [Trajectory], built from the
// attempt's normalized events (adapters.Event):
//
//   - assistant text (complete text replaces the streamed fragments it
//     repeats), reasoning and tool calls become "agent" steps; a step ends
//     once a tool result arrives for it, so the next text, reasoning or
//     tool call starts the next step (the next model call);
//   - tool results become the observation of the step holding their call
//     (source_call_id), or of the current step when no call matches; their
//     content is the bounded preview Outpost records (adapters.PreviewLimit
//     bytes), the full length in extra.characters;
//   - live input becomes a "user" step, failures and warnings "system"
//     steps; the final answer (result) a last agent step unless it repeats
//     the last message;
//   - file changes, the CLI's own retries and quota signals go into the
//     extra of the step they happened in; message-scoped usage reports into
//     its metrics, the attempt's total usage into final_metrics.
//
// The prompt the attempt was sent is the first step, a "user" step
// (extra.outpost_kind "prompt"): the job's prompt as the run directory kept
// it (runrec.JobDir.HasInput: jobs/NAME/input.json), or the attempt's own
// (runrec.AttemptResult.Prompt: the continue prompt of a turn resumed after
// a quota wait). A run directory without input.json holds no prompt: its
// trajectories begin with the agent's first step (or the live input it was
// given), and Notes says so. Nothing here reads the environment or prints.
package atif

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/usage"
)

// SchemaVersion is the ATIF version the export follows.
const SchemaVersion = "ATIF-v1.7"

// Step sources.
const (
	SourceSystem = "system"
	SourceUser   = "user"
	SourceAgent  = "agent"
)

// Trajectory is an ATIF root object.
type Trajectory struct {
	SchemaVersion string         `json:"schema_version"`
	SessionID     string         `json:"session_id,omitempty"`
	TrajectoryID  string         `json:"trajectory_id,omitempty"`
	Agent         Agent          `json:"agent"`
	Steps         []Step         `json:"steps"`
	Notes         string         `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics  `json:"final_metrics,omitempty"`
	Extra         map[string]any `json:"extra,omitempty"`
}

// Agent is ATIF's AgentSchema.
type Agent struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	ModelName string         `json:"model_name,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
}

// Step is ATIF's StepObject. Message is required and may be empty.
type Step struct {
	StepID           int            `json:"step_id"`
	Timestamp        string         `json:"timestamp,omitempty"`
	Source           string         `json:"source"`
	ModelName        string         `json:"model_name,omitempty"`
	Message          string         `json:"message"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall     `json:"tool_calls,omitempty"`
	Observation      *Observation   `json:"observation,omitempty"`
	Metrics          *Metrics       `json:"metrics,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`

	// deltas says Message was built from streamed fragments, which a
	// complete text then replaces.
	deltas bool
	// ledger sums the step's message-scoped usage reports (a message's
	// repeated reports count once); costs says each carried a cost.
	ledger        *usage.Ledger
	costs, noCost bool
}

// ToolCall is ATIF's ToolCallSchema; Arguments is always a JSON object.
type ToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// Observation is ATIF's ObservationSchema.
type Observation struct {
	Results []ObservationResult `json:"results"`
}

// ObservationResult is ATIF's ObservationResultSchema.
type ObservationResult struct {
	SourceCallID string         `json:"source_call_id,omitempty"`
	Content      string         `json:"content"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Metrics is ATIF's MetricsSchema: prompt tokens count every input token,
// cached ones included.
type Metrics struct {
	PromptTokens     int64          `json:"prompt_tokens"`
	CompletionTokens int64          `json:"completion_tokens"`
	CachedTokens     int64          `json:"cached_tokens"`
	CostUSD          *float64       `json:"cost_usd,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// FinalMetrics is ATIF's FinalMetricsSchema.
type FinalMetrics struct {
	TotalPromptTokens     int64          `json:"total_prompt_tokens"`
	TotalCompletionTokens int64          `json:"total_completion_tokens"`
	TotalCachedTokens     int64          `json:"total_cached_tokens"`
	TotalCostUSD          *float64       `json:"total_cost_usd,omitempty"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// Notes: how an export begins, then what every export shares.
const (
	notesPrompt    = "Exported by Outpost from a run directory. The first step is the job's prompt as the run directory kept it%s. "
	notesContinued = "Exported by Outpost from a run directory. The first step is the prompt this attempt was sent: it resumed the conversation of an earlier attempt after a quota wait, with Outpost's continue prompt. "
	notesNoPrompt  = "Exported by Outpost from a run directory. The user's prompt is not recorded there, so the trajectory starts with the agent. "
	notesShared    = "Tool results hold the preview Outpost keeps (at most 2000 bytes; extra.characters is the full length). " +
		"extra.outpost holds the job, the attempt, its metadata and Outpost's classified outcome."
)

// FromAttempt exports attempt a of job j as one trajectory. agent names the
// CLI when the attempt's result does not (an unfinished attempt).
func FromAttempt(j runrec.JobDir, agent string, a runrec.AttemptDir) *Trajectory {
	b := builder{}
	for _, ev := range a.Events {
		b.add(ev)
	}
	job := j.ID
	t := &Trajectory{SchemaVersion: SchemaVersion, SessionID: b.session,
		TrajectoryID: job + "#attempt-" + strconv.Itoa(a.Number)}
	res := a.Result
	name, version, model := agent, b.version, b.model
	if res != nil {
		name = cmp.Or(res.Agent, name)
		version = cmp.Or(version, res.Outcome.CLIVersion)
		model = cmp.Or(res.Model, model)
		if t.SessionID == "" {
			t.SessionID = res.Outcome.Conversation
		}
	}
	t.Agent = Agent{Name: cmp.Or(name, "unknown"), Version: cmp.Or(version, "unknown"), ModelName: model}
	prompt, extra, kept := "", map[string]any{"outpost_kind": "prompt"}, true
	switch {
	case res != nil && res.Prompt != "":
		prompt = res.Prompt
		extra["continue_prompt"] = true
		t.Notes = notesContinued + notesShared
	case j.HasInput:
		prompt = j.Prompt
		cut := ""
		if j.PromptCut > 0 {
			cut = fmt.Sprintf(" (its first %d bytes; extra.prompt_bytes_cut counts the rest)", len(j.Prompt))
			extra["prompt_bytes_cut"] = j.PromptCut
		}
		t.Notes = fmt.Sprintf(notesPrompt, cut) + notesShared
	default:
		t.Notes, kept = notesNoPrompt+notesShared, false
	}
	if kept {
		ts := ""
		if res != nil {
			ts = stamp(res.Started)
		}
		b.steps = append([]Step{{Source: SourceUser, Message: prompt, Timestamp: ts, Extra: extra}}, b.steps...)
	}
	if len(b.steps) == 0 {
		// ATIF's steps hold the interaction; an attempt that recorded none
		// still says so in one system step.
		b.steps = append(b.steps, Step{Source: SourceSystem, Message: "Outpost recorded no events for this attempt."})
	}
	for i := range b.steps {
		b.steps[i].StepID = i + 1
		b.steps[i].Metrics = b.steps[i].metrics()
		if b.steps[i].Source == SourceAgent && b.steps[i].ModelName == "" {
			b.steps[i].ModelName = model
		}
	}
	t.Steps = b.steps
	outpost := map[string]any{"job": job, "attempt": a.Number}
	if len(j.Metadata) > 0 {
		outpost["metadata"] = j.Metadata
	}
	if res != nil {
		outpost["outcome"] = res.Outcome
		if !res.Started.IsZero() {
			outpost["started"] = res.Started.UTC().Format(time.RFC3339Nano)
		}
		outpost["duration_ms"] = res.DurationMS
		u := res.Outcome.Usage
		fm := &FinalMetrics{TotalPromptTokens: u.Input + u.Cached + u.CacheCreated, TotalCompletionTokens: u.Output,
			TotalCachedTokens: u.Cached, TotalSteps: len(t.Steps),
			Extra: map[string]any{"usage_complete": u.Complete, "cache_creation_input_tokens": u.CacheCreated}}
		if u.CostKnown {
			c := u.CostUSD
			fm.TotalCostUSD = &c
			fm.Extra["cost_source"] = u.CostSource
		}
		t.FinalMetrics = fm
	} else {
		outpost["unfinished"] = true
	}
	if a.Truncated != nil {
		outpost["trajectory_truncated_after_seq"] = a.Truncated.AfterSeq
	}
	if a.Omitted > 0 {
		outpost["events_omitted"] = a.Omitted
	}
	if len(b.signals) > 0 {
		outpost["cli_signals"] = b.signals
	}
	if b.finished != nil {
		outpost["finished"] = b.finished
	}
	if b.raw > 0 {
		outpost["raw_events"] = b.raw
	}
	t.Extra = map[string]any{"outpost": outpost}
	return t
}

// builder turns events into steps.
type builder struct {
	steps          []Step
	cur            int // index of the open agent step; -1 (or out of range): none
	opened         bool
	session        string
	version, model string
	signals        []map[string]any
	finished       *adapters.FinishedDetail
	raw            int
}

// agent returns the open agent step, opening one when there is none or the
// open one already has tool results (the next model call).
func (b *builder) agent(ev adapters.Event) *Step {
	if !b.opened || b.steps[b.cur].Observation != nil {
		b.steps = append(b.steps, Step{Source: SourceAgent, Timestamp: stamp(ev.Time)})
		b.cur, b.opened = len(b.steps)-1, true
	}
	return &b.steps[b.cur]
}

// other appends a step of source and closes the open agent step.
func (b *builder) other(source, text string, ev adapters.Event, extra map[string]any) {
	b.steps = append(b.steps, Step{Source: source, Message: text, Timestamp: stamp(ev.Time), Extra: extra})
	b.opened = false
}

func (b *builder) add(ev adapters.Event) {
	switch ev.Kind {
	case adapters.KindConversation:
		if b.session == "" {
			b.session = ev.Conversation
		}
		b.version = cmp.Or(b.version, ev.Version)
		b.model = cmp.Or(b.model, ev.Model)
	case adapters.KindInput:
		b.other(SourceUser, ev.Text, ev, nil)
	case adapters.KindTextDelta:
		s := b.agent(ev)
		if s.Message != "" && !s.deltas {
			s.Message += "\n\n"
		}
		s.Message += ev.Text
		s.deltas = true
	case adapters.KindText:
		s := b.agent(ev)
		switch {
		case s.deltas:
			// The complete text repeats the fragments streamed before it.
			s.Message, s.deltas = ev.Text, false
		case s.Message != "":
			s.Message += "\n\n" + ev.Text
		default:
			s.Message = ev.Text
		}
	case adapters.KindReasoning:
		s := b.agent(ev)
		if s.ReasoningContent != "" {
			s.ReasoningContent += "\n\n"
		}
		s.ReasoningContent += ev.Text
	case adapters.KindTool:
		if ev.Tool == nil {
			return
		}
		s := b.agent(ev)
		id := ev.Tool.CallID
		if id == "" {
			id = "outpost-call-" + strconv.FormatInt(ev.Seq, 10)
		}
		s.ToolCalls = append(s.ToolCalls, ToolCall{ToolCallID: id, FunctionName: cmp.Or(ev.Tool.Name, "unknown"), Arguments: arguments(ev.Tool.Input)})
	case adapters.KindToolResult:
		if ev.ToolResult != nil {
			b.result(ev)
		}
	case adapters.KindFileChange:
		if ev.FileChange != nil && b.opened {
			s := &b.steps[b.cur]
			appendExtra(s, "file_changes", map[string]any{"path": ev.FileChange.Path, "change": ev.FileChange.Change})
		}
	case adapters.KindUsage:
		if ev.Usage != nil && ev.Usage.Scope == usage.ScopeMessage && b.opened {
			s := &b.steps[b.cur]
			if s.ledger == nil {
				s.ledger = &usage.Ledger{}
			}
			s.ledger.Add(*ev.Usage)
			if ev.Usage.CostKnown || ev.Usage.HasCost {
				s.costs = true
			} else {
				s.noCost = true
			}
		}
	case adapters.KindResult:
		if ev.Text == "" || ev.Text == b.lastMessage() {
			return
		}
		b.other(SourceAgent, ev.Text, ev, map[string]any{"outpost_kind": "result"})
	case adapters.KindFailure:
		extra := map[string]any{"outpost_kind": "failure"}
		if ev.Failure != nil {
			extra["failure"] = ev.Failure
		}
		b.other(SourceSystem, ev.Text, ev, extra)
	case adapters.KindWarning:
		b.other(SourceSystem, ev.Text, ev, map[string]any{"outpost_kind": "warning"})
	case adapters.KindRetry, adapters.KindQuota:
		sig := map[string]any{"kind": ev.Kind, "seq": ev.Seq}
		if ev.Retry != nil {
			sig["retry"] = ev.Retry
		}
		if ev.Quota != nil {
			sig["quota"] = ev.Quota
		}
		if ev.Text != "" {
			sig["text"] = ev.Text
		}
		b.signals = append(b.signals, sig)
	case adapters.KindFinished:
		b.finished = ev.Finished
	case adapters.KindRaw:
		b.raw++
	}
}

// result adds a tool result to the step holding its call, else to the
// open agent step (opening one) without a source_call_id.
func (b *builder) result(ev adapters.Event) {
	tr := ev.ToolResult
	r := ObservationResult{Content: tr.Preview, Extra: map[string]any{"characters": tr.Characters}}
	if tr.IsError {
		r.Extra["is_error"] = true
	}
	if tr.Name != "" {
		r.Extra["name"] = tr.Name
	}
	target := -1
	if tr.CallID != "" {
	find:
		for i := len(b.steps) - 1; i >= 0; i-- {
			for _, c := range b.steps[i].ToolCalls {
				if c.ToolCallID == tr.CallID {
					target = i
					break find
				}
			}
		}
	}
	if target >= 0 {
		r.SourceCallID = tr.CallID
	} else {
		if tr.CallID != "" {
			r.Extra["call_id"] = tr.CallID
		}
		b.agent(ev)
		target = b.cur
	}
	s := &b.steps[target]
	if s.Observation == nil {
		s.Observation = &Observation{}
	}
	s.Observation.Results = append(s.Observation.Results, r)
}

// lastMessage is the message of the last agent step.
func (b *builder) lastMessage() string {
	for i := len(b.steps) - 1; i >= 0; i-- {
		if b.steps[i].Source == SourceAgent && b.steps[i].Message != "" {
			return b.steps[i].Message
		}
	}
	return ""
}

// arguments is a tool input as a JSON object: an object as it is, nothing
// as {}, anything else as {"input": value}.
func arguments(in json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(in)
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage(`{}`)
	case t[0] == '{' && json.Valid(t):
		return append(json.RawMessage(nil), t...)
	case json.Valid(t):
		return json.RawMessage(fmt.Sprintf(`{"input":%s}`, t))
	}
	b, _ := json.Marshal(map[string]string{"input": string(t)})
	return b
}

// metrics is a step's metrics from its usage reports (nil: none).
func (s *Step) metrics() *Metrics {
	if s.ledger == nil {
		return nil
	}
	u := s.ledger.MessageSum()
	m := &Metrics{PromptTokens: u.Input + u.Cached + u.CacheCreated, CompletionTokens: u.Output, CachedTokens: u.Cached}
	if u.CacheCreated > 0 {
		m.Extra = map[string]any{"cache_creation_input_tokens": u.CacheCreated}
	}
	if s.costs && !s.noCost {
		c := u.CostUSD
		m.CostUSD = &c
	}
	return m
}

func appendExtra(s *Step, key string, v any) {
	if s.Extra == nil {
		s.Extra = map[string]any{}
	}
	list, _ := s.Extra[key].([]any)
	s.Extra[key] = append(list, v)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
