package atif_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/atif"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

// validate checks an ATIF document (decoded JSON) against the required
// fields, types and rules of ATIF v1.7 (Harbor rfcs/0001-trajectory-format.md,
// "Changelog v1.7", section II): the root's schema_version, agent and
// steps; the agent's name and version; every step's step_id (sequential
// from 1), source (system, user or agent) and message (a string or an array
// of content parts); the agent-only step fields; every tool call's
// tool_call_id, function_name and arguments (an object); every observation's
// results, and each result's source_call_id naming a tool call of its step;
// content parts' type and conditional text/source; subagent references
// setting trajectory_id or trajectory_path; embedded subagents' unique
// trajectory_id; and the types of the optional fields that are present.
// It returns every violation, by JSON path.
func validate(doc map[string]any) []string {
	v := &validator{}
	v.trajectory("$", doc, false)
	return v.errs
}

type validator struct{ errs []string }

func (v *validator) fail(path, format string, args ...any) {
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, args...))
}

// field checks one field of obj: required or optional, of kind k
// ("string", "integer", "number", "object", "array", "boolean").
func (v *validator) field(path string, obj map[string]any, name string, required bool, k string) (any, bool) {
	val, ok := obj[name]
	if !ok || val == nil {
		if required {
			v.fail(path+"."+name, "required, missing")
		}
		return nil, false
	}
	if !isKind(val, k) {
		v.fail(path+"."+name, "want %s, got %T", k, val)
		return nil, false
	}
	return val, true
}

func isKind(val any, k string) bool {
	switch k {
	case "string":
		_, ok := val.(string)
		return ok
	case "number":
		_, ok := val.(float64)
		return ok
	case "integer":
		f, ok := val.(float64)
		return ok && f == math.Trunc(f)
	case "object":
		_, ok := val.(map[string]any)
		return ok
	case "array":
		_, ok := val.([]any)
		return ok
	case "boolean":
		_, ok := val.(bool)
		return ok
	}
	panic(k)
}

func (v *validator) trajectory(path string, doc map[string]any, embedded bool) {
	if s, ok := v.field(path, doc, "schema_version", true, "string"); ok && !strings.HasPrefix(s.(string), "ATIF-v") {
		v.fail(path+".schema_version", "want ATIF-vX.Y, got %q", s)
	}
	v.field(path, doc, "session_id", false, "string")
	v.field(path, doc, "trajectory_id", embedded, "string")
	v.field(path, doc, "notes", false, "string")
	v.field(path, doc, "continued_trajectory_ref", false, "string")
	v.field(path, doc, "extra", false, "object")
	if a, ok := v.field(path, doc, "agent", true, "object"); ok {
		agent := a.(map[string]any)
		v.field(path+".agent", agent, "name", true, "string")
		v.field(path+".agent", agent, "version", true, "string")
		v.field(path+".agent", agent, "model_name", false, "string")
		v.field(path+".agent", agent, "tool_definitions", false, "array")
		v.field(path+".agent", agent, "extra", false, "object")
	}
	if fm, ok := v.field(path, doc, "final_metrics", false, "object"); ok {
		m := fm.(map[string]any)
		for _, n := range []string{"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_steps"} {
			v.field(path+".final_metrics", m, n, false, "integer")
		}
		v.field(path+".final_metrics", m, "total_cost_usd", false, "number")
		v.field(path+".final_metrics", m, "extra", false, "object")
	}
	if st, ok := v.field(path, doc, "steps", true, "array"); ok {
		for i, s := range st.([]any) {
			sp := fmt.Sprintf("%s.steps[%d]", path, i)
			step, ok := s.(map[string]any)
			if !ok {
				v.fail(sp, "want object, got %T", s)
				continue
			}
			v.step(sp, step, i+1)
		}
	}
	if subs, ok := v.field(path, doc, "subagent_trajectories", false, "array"); ok {
		seen := map[string]bool{}
		for i, s := range subs.([]any) {
			sp := fmt.Sprintf("%s.subagent_trajectories[%d]", path, i)
			sub, ok := s.(map[string]any)
			if !ok {
				v.fail(sp, "want object, got %T", s)
				continue
			}
			v.trajectory(sp, sub, true)
			if id, _ := sub["trajectory_id"].(string); id != "" {
				if seen[id] {
					v.fail(sp+".trajectory_id", "%q is not unique among the subagent trajectories", id)
				}
				seen[id] = true
			}
		}
	}
}

func (v *validator) step(path string, step map[string]any, want int) {
	if id, ok := v.field(path, step, "step_id", true, "integer"); ok && int(id.(float64)) != want {
		v.fail(path+".step_id", "want %d (sequential from 1), got %v", want, id)
	}
	source, _ := v.field(path, step, "source", true, "string")
	switch source {
	case atif.SourceSystem, atif.SourceUser, atif.SourceAgent, nil:
	default:
		v.fail(path+".source", "want system, user or agent, got %q", source)
	}
	if msg, ok := step["message"]; !ok || msg == nil {
		v.fail(path+".message", "required, missing")
	} else if parts, isArray := msg.([]any); isArray {
		v.contentParts(path+".message", parts)
	} else if _, isString := msg.(string); !isString {
		v.fail(path+".message", "want a string or an array of content parts, got %T", msg)
	}
	if ts, ok := v.field(path, step, "timestamp", false, "string"); ok {
		if _, err := time.Parse(time.RFC3339Nano, ts.(string)); err != nil {
			v.fail(path+".timestamp", "not ISO 8601: %v", err)
		}
	}
	v.field(path, step, "extra", false, "object")
	v.field(path, step, "llm_call_count", false, "integer")
	v.field(path, step, "is_copied_context", false, "boolean")
	// Fields that apply to agent steps only.
	for _, name := range []string{"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"} {
		if _, ok := step[name]; ok && source != atif.SourceAgent {
			v.fail(path+"."+name, "only agent steps carry it (source %q)", source)
		}
	}
	v.field(path, step, "model_name", false, "string")
	v.field(path, step, "reasoning_content", false, "string")
	if re, ok := step["reasoning_effort"]; ok && re != nil && !isKind(re, "string") && !isKind(re, "number") {
		v.fail(path+".reasoning_effort", "want a string or a number, got %T", re)
	}
	calls := map[string]bool{}
	if tc, ok := v.field(path, step, "tool_calls", false, "array"); ok {
		for i, c := range tc.([]any) {
			cp := fmt.Sprintf("%s.tool_calls[%d]", path, i)
			call, ok := c.(map[string]any)
			if !ok {
				v.fail(cp, "want object, got %T", c)
				continue
			}
			if id, ok := v.field(cp, call, "tool_call_id", true, "string"); ok {
				calls[id.(string)] = true
			}
			v.field(cp, call, "function_name", true, "string")
			v.field(cp, call, "arguments", true, "object")
			v.field(cp, call, "extra", false, "object")
		}
	}
	if ob, ok := v.field(path, step, "observation", false, "object"); ok {
		if rs, ok := v.field(path+".observation", ob.(map[string]any), "results", true, "array"); ok {
			for i, r := range rs.([]any) {
				rp := fmt.Sprintf("%s.observation.results[%d]", path, i)
				res, ok := r.(map[string]any)
				if !ok {
					v.fail(rp, "want object, got %T", r)
					continue
				}
				if id, ok := v.field(rp, res, "source_call_id", false, "string"); ok && !calls[id.(string)] {
					v.fail(rp+".source_call_id", "%q names no tool call of this step", id)
				}
				if c, ok := res["content"]; ok && c != nil {
					if parts, isArray := c.([]any); isArray {
						v.contentParts(rp+".content", parts)
					} else if _, isString := c.(string); !isString {
						v.fail(rp+".content", "want a string or an array of content parts, got %T", c)
					}
				}
				v.field(rp, res, "extra", false, "object")
				if refs, ok := v.field(rp, res, "subagent_trajectory_ref", false, "array"); ok {
					for j, ref := range refs.([]any) {
						m, _ := ref.(map[string]any)
						id, _ := m["trajectory_id"].(string)
						p, _ := m["trajectory_path"].(string)
						if id == "" && p == "" {
							v.fail(fmt.Sprintf("%s.subagent_trajectory_ref[%d]", rp, j), "sets neither trajectory_id nor trajectory_path")
						}
					}
				}
			}
		}
	}
	if mt, ok := v.field(path, step, "metrics", false, "object"); ok {
		m := mt.(map[string]any)
		for _, n := range []string{"prompt_tokens", "completion_tokens", "cached_tokens"} {
			v.field(path+".metrics", m, n, false, "integer")
		}
		v.field(path+".metrics", m, "cost_usd", false, "number")
		for _, n := range []string{"prompt_token_ids", "completion_token_ids", "logprobs"} {
			v.field(path+".metrics", m, n, false, "array")
		}
		v.field(path+".metrics", m, "extra", false, "object")
	}
}

func (v *validator) contentParts(path string, parts []any) {
	for i, p := range parts {
		pp := fmt.Sprintf("%s[%d]", path, i)
		part, ok := p.(map[string]any)
		if !ok {
			v.fail(pp, "want object, got %T", p)
			continue
		}
		typ, _ := v.field(pp, part, "type", true, "string")
		switch typ {
		case "text":
			v.field(pp, part, "text", true, "string")
		case "image":
			if src, ok := v.field(pp, part, "source", true, "object"); ok {
				v.field(pp+".source", src.(map[string]any), "media_type", true, "string")
				v.field(pp+".source", src.(map[string]any), "path", true, "string")
			}
		case nil:
		default:
			v.fail(pp+".type", "want text or image, got %q", typ)
		}
	}
}

// sampleRun records the sample run (runrectest: a real batch replaying the
// CLIs' captured output) and reads it back with its trajectories.
func sampleRun(t *testing.T) *runrec.Run {
	t.Helper()
	dir := t.TempDir()
	_, err := runrectest.Sample(dir, os.DirFS(".."), runrectest.Options{Hostile: true})
	require.NoError(t, err)
	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	return run
}

func decode(t *testing.T, tr *atif.Trajectory) map[string]any {
	t.Helper()
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	return doc
}

// TestRecordedRunExportsValidATIF exports every attempt of a recorded run
// (Claude Code, Codex and Copilot trajectories: text, reasoning, tool
// calls and results, usage, quota, failures, hostile text) and checks each
// document against ATIF v1.7's required fields and rules.
func TestRecordedRunExportsValidATIF(t *testing.T) {
	run := sampleRun(t)
	agents := map[string]string{}
	for _, r := range run.Records {
		agents[r.Job] = r.Agent
	}
	var attempts, calls, linked, agentSteps, withMetrics, prompts, continued int
	for _, j := range run.Jobs {
		require.True(t, j.HasInput, "%s: the batch kept its input", j.ID)
		for _, a := range j.Attempts {
			attempts++
			tr := atif.FromAttempt(j, agents[j.ID], a)
			doc := decode(t, tr)
			require.Empty(t, validate(doc), "%s attempt %d", j.ID, a.Number)
			assert.Equal(t, "ATIF-v1.7", doc["schema_version"])
			assert.Equal(t, j.ID+"#attempt-"+fmt.Sprint(a.Number), doc["trajectory_id"])
			// The prompt the attempt was sent is the first step, a user
			// step: the job's, or a resumed turn's continue prompt.
			first := tr.Steps[0]
			assert.Equal(t, atif.SourceUser, first.Source, "%s attempt %d", j.ID, a.Number)
			assert.Equal(t, "prompt", first.Extra["outpost_kind"])
			assert.NotContains(t, tr.Notes, "not recorded")
			if a.Result != nil && a.Result.Prompt != "" {
				continued++
				assert.Greater(t, a.Number, 1, j.ID)
				assert.Equal(t, batch.DefaultContinuePrompt, first.Message, "%s attempt %d", j.ID, a.Number)
				assert.Equal(t, true, first.Extra["continue_prompt"])
			} else {
				prompts++
				assert.Equal(t, j.Prompt, first.Message, "%s attempt %d", j.ID, a.Number)
				assert.Contains(t, tr.Notes, "The first step is the job's prompt")
			}
			if len(j.Metadata) > 0 {
				assert.JSONEq(t, string(j.Metadata), string(tr.Extra["outpost"].(map[string]any)["metadata"].(json.RawMessage)), j.ID)
			}
			for _, s := range tr.Steps {
				if s.Source == atif.SourceAgent {
					agentSteps++
				}
				if s.Metrics != nil {
					withMetrics++
				}
				calls += len(s.ToolCalls)
				if s.Observation != nil {
					for _, r := range s.Observation.Results {
						if r.SourceCallID != "" {
							linked++
						}
					}
				}
			}
			if a.Result != nil {
				require.NotNil(t, tr.FinalMetrics, j.ID)
				assert.Equal(t, len(tr.Steps), tr.FinalMetrics.TotalSteps)
				assert.NotEqual(t, "unknown", tr.Agent.Name, j.ID)
			}
		}
	}
	// The export is not vacuous: the run's tool fixtures give tool calls
	// whose results are linked back to them, and usage gives metrics.
	assert.Greater(t, attempts, 20)
	assert.Greater(t, agentSteps, attempts/2)
	assert.Positive(t, calls)
	assert.Positive(t, linked)
	assert.Positive(t, withMetrics)
	// migrate-db and copilot-park resume once after a quota wait,
	// weekly-limit three times.
	assert.Equal(t, 5, continued)
	assert.Equal(t, attempts-continued, prompts)
}

// TestNoInputNoPromptStep: a run directory without input.json (one written
// before prompts were kept) exports trajectories that begin with the agent
// and say why; a prompt cut to its bound says how much is missing.
func TestNoInputNoPromptStep(t *testing.T) {
	run := sampleRun(t)
	var j runrec.JobDir
	for _, job := range run.Jobs {
		if job.ID == "add-tests" {
			j = job
		}
	}
	require.NotEmpty(t, j.Attempts)
	j.HasInput, j.Prompt = false, ""
	tr := atif.FromAttempt(j, "claude", j.Attempts[0])
	require.Empty(t, validate(decode(t, tr)))
	assert.Equal(t, atif.SourceAgent, tr.Steps[0].Source)
	assert.Contains(t, tr.Notes, "The user's prompt is not recorded there")

	j.HasInput, j.Prompt, j.PromptCut = true, "Add tests", 1000
	tr = atif.FromAttempt(j, "claude", j.Attempts[0])
	require.Empty(t, validate(decode(t, tr)))
	assert.Equal(t, "Add tests", tr.Steps[0].Message)
	assert.EqualValues(t, 1000, tr.Steps[0].Extra["prompt_bytes_cut"])
	assert.Contains(t, tr.Notes, "its first 9 bytes")
}

// TestValidatorCatchesViolations: every required field removed, and each
// rule broken, is reported — the validation above cannot pass vacuously.
func TestValidatorCatchesViolations(t *testing.T) {
	run := sampleRun(t)
	var doc map[string]any
	for _, j := range run.Jobs {
		if j.ID == "add-tests" {
			doc = decode(t, atif.FromAttempt(j, "claude", j.Attempts[0]))
		}
	}
	require.NotNil(t, doc)
	require.Empty(t, validate(doc))
	toolStep := func(d map[string]any) map[string]any {
		for _, s := range d["steps"].([]any) {
			if m := s.(map[string]any); m["tool_calls"] != nil && m["observation"] != nil {
				return m
			}
		}
		t.Fatal("no step with a tool call and its result")
		return nil
	}
	cases := map[string]func(d map[string]any){
		"$.schema_version: required":   func(d map[string]any) { delete(d, "schema_version") },
		"$.agent: required":            func(d map[string]any) { delete(d, "agent") },
		"$.agent.name: required":       func(d map[string]any) { delete(d["agent"].(map[string]any), "name") },
		"$.agent.version: required":    func(d map[string]any) { delete(d["agent"].(map[string]any), "version") },
		"$.steps: required":            func(d map[string]any) { delete(d, "steps") },
		"$.steps[0].step_id: required": func(d map[string]any) { delete(d["steps"].([]any)[0].(map[string]any), "step_id") },
		"$.steps[0].source: required":  func(d map[string]any) { delete(d["steps"].([]any)[0].(map[string]any), "source") },
		"$.steps[0].message: required": func(d map[string]any) { delete(d["steps"].([]any)[0].(map[string]any), "message") },
		"$.steps[0].step_id: want 1":   func(d map[string]any) { d["steps"].([]any)[0].(map[string]any)["step_id"] = 2.0 },
		"$.steps[0].source: want":      func(d map[string]any) { d["steps"].([]any)[0].(map[string]any)["source"] = "assistant" },
		"tool_call_id: required": func(d map[string]any) {
			delete(toolStep(d)["tool_calls"].([]any)[0].(map[string]any), "tool_call_id")
		},
		"function_name: required": func(d map[string]any) {
			delete(toolStep(d)["tool_calls"].([]any)[0].(map[string]any), "function_name")
		},
		"arguments: want object": func(d map[string]any) {
			toolStep(d)["tool_calls"].([]any)[0].(map[string]any)["arguments"] = "ls"
		},
		"observation.results: required": func(d map[string]any) { delete(toolStep(d)["observation"].(map[string]any), "results") },
		"source_call_id: \"nope\" names no tool call": func(d map[string]any) {
			toolStep(d)["observation"].(map[string]any)["results"].([]any)[0].(map[string]any)["source_call_id"] = "nope"
		},
		"only agent steps carry it": func(d map[string]any) { toolStep(d)["source"] = "user" },
		"timestamp: not ISO 8601":   func(d map[string]any) { d["steps"].([]any)[0].(map[string]any)["timestamp"] = "yesterday" },
	}
	for want, mutate := range cases {
		t.Run(want, func(t *testing.T) {
			var d map[string]any
			b, _ := json.Marshal(doc)
			require.NoError(t, json.Unmarshal(b, &d))
			mutate(d)
			errs := validate(d)
			require.NotEmpty(t, errs)
			assert.Contains(t, strings.Join(errs, "\n"), want)
		})
	}
}
