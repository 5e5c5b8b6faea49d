package harness

import (
	"context"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/typed"
)

// runTyped runs a typed-response turn: the answer, validated, and at most
// one repair turn on the same conversation.
func runTyped(ctx context.Context, t Turn) (res *Result, err error) {
	t = t.withDefaults()
	failed := func(err error) (*Result, error) {
		res := &Result{Started: t.Now(), Counts: map[adapters.Kind]int{}, Err: err}
		if t.Adapter != nil {
			res.Agent = t.Adapter.Name()
		}
		return res, err
	}
	if t.Adapter == nil {
		return failed(outposterr.New(outposterr.Configuration, "turn has no adapter"))
	}
	name := t.Adapter.Name()
	schema, cerr := typed.Compile(t.Schema)
	if cerr != nil {
		return failed(outposterr.Wrap(outposterr.Configuration, cerr, "%s: typed response", name))
	}
	if t.Live != nil {
		return failed(outposterr.New(outposterr.Configuration, "%s: a typed response cannot be combined with live input", name))
	}
	if err := preflight(t); err != nil {
		return failed(err)
	}
	caps := t.Adapter.Capabilities()
	if caps.StructuredOutput {
		t.Input.Schema = schema.JSON()
	} else {
		t.Input.Schema = nil
		t.Input.Prompt += schema.Instruction()
	}

	// One lease for the answer and its repair, so the repair finds the
	// conversation even without a store.
	if t.Sandbox == nil {
		actx, acancel := context.WithTimeout(ctx, t.Deadline)
		sb, aerr := t.Provider.Acquire(actx, t.Spec)
		acancel()
		if aerr != nil {
			return failed(classifyInfra(ctx, t, outposterr.Sandbox, "acquire sandbox", aerr))
		}
		defer func() {
			if rerr := release(ctx, t, sb); rerr != nil && res != nil {
				res.Warnings = append(res.Warnings, "release sandbox: "+rerr.Error())
			}
		}()
		t.Sandbox, t.Provider = sb, nil
	}

	res, err = runReseed(ctx, t)
	if err != nil {
		return res, err
	}
	value, cerr := schema.Check(res.Text)
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
	r := t
	r.Input.Prompt = schema.RepairPrompt(cerr)
	r.Input.Continue, r.Input.Fork, r.Reseed = res.Conversation, false, false
	r.baseline = res.cumulative
	res2, err2 := runReseed(ctx, r)
	res2.Repaired = true
	res2.Started = res.Started
	res2.Duration = t.Now().Sub(res.Started)
	res2.Usage = res.Usage.Add(res2.Usage)
	for k, n := range res.Counts {
		res2.Counts[k] += n
	}
	res2.Warnings = append([]string{"typed response: the first answer failed (" + cerr.Error() + "); one repair turn ran"},
		res2.Warnings...)
	if err2 != nil {
		return res2, err2
	}
	value, cerr = schema.Check(res2.Text)
	if cerr != nil {
		return protocolFailure(res2, name, cerr.Error()+" (after one repair turn)")
	}
	res2.Value = value
	return res2, nil
}

// protocolFailure fails res with a protocol error naming what failed.
func protocolFailure(res *Result, agent, what string) (*Result, error) {
	err := &outposterr.Error{Class: outposterr.Protocol, Message: agent + ": typed response: " + what,
		Details: outposterr.Details{Agent: agent}}
	res.Err = err
	return res, err
}
