package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// runTyped runs a typed-response turn in t's lease: the answer, validated,
// and at most one repair turn on the same conversation.
func runTyped(ctx context.Context, t Turn, started time.Time) (*Result, error) {
	name := t.Adapter.Name()
	schema := t.Schema
	in := t.Input
	caps := t.Adapter.Capabilities()
	if caps.StructuredOutput {
		in.Schema = schema.JSON()
	} else {
		in.Schema = nil
		in.Prompt += schema.Instruction()
	}

	res, err := runReseed(ctx, t, in, nil)
	res.Started = started
	if err != nil {
		return res, err
	}
	value, cerr := checkAnswer(t, res)
	if cerr == nil {
		res.Value = value
		return res, nil
	}
	if !caps.Resumable || res.Conversation == "" || ctx.Err() != nil {
		why := "the CLI cannot continue the conversation"
		if ctx.Err() != nil {
			why = "the turn was cancelled"
		} else if caps.Resumable {
			why = "the CLI named no conversation"
		}
		return protocolFailure(res, name, cerr.Error()+" (no repair turn: "+why+")")
	}

	t.Logger.Debug("typed response: repair turn", "agent", name, "reason", cerr.Error())
	repair := in
	repair.Prompt = schema.RepairPrompt(cerr)
	repair.Continue, repair.Fork = res.Conversation, false
	t.Reseed = false
	res2, err2 := runReseed(ctx, t, repair, res.cumulative)
	res2.Repaired = true
	res2.Started = started
	res2.Duration = t.Now().Sub(started)
	res2.Usage = res.Usage.Add(res2.Usage)
	for k, n := range res.Counts {
		res2.Counts[k] += n
	}
	res2.Warnings = append([]string{"typed response: the first answer failed (" + cerr.Error() + "); one repair turn ran"},
		res2.Warnings...)
	res2.joinSecretPrinted(res)
	if err2 != nil {
		return res2, err2
	}
	value, cerr = checkAnswer(t, res2)
	if cerr != nil {
		return protocolFailure(res2, name, cerr.Error()+" (after one repair turn)")
	}
	res2.Value = value
	return res2, nil
}

// checkAnswer validates res's answer. A cut answer (Limits.TextBytes) is
// not the CLI's: a prefix that happens to be valid JSON is never taken.
func checkAnswer(t Turn, res *Result) (json.RawMessage, error) {
	if res.TextTruncated {
		return nil, fmt.Errorf("the answer was cut at %d bytes (the bound on an answer); a shorter one is needed", t.Limits.TextBytes)
	}
	return t.Schema.Check(res.Text)
}

// protocolFailure fails res with a protocol error naming what failed.
func protocolFailure(res *Result, agent, what string) (*Result, error) {
	err := &outposterr.Error{Class: outposterr.Protocol, Message: agent + ": typed response: " + what,
		Details: outposterr.Details{Agent: agent}}
	res.Err = err
	return res, err
}
