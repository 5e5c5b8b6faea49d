package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// limitReached makes a failed turn whose sandbox refused its CLI a fork at
// the process limit a process failure that names the limit: the deadline
// it ran into, or the final event it never printed, was the limit's doing,
// and running the same turn again in the same sandbox would hit it again.
// Only failures the CLI's own conduct explains are asked about (process
// and timeout failures without a limit or budget already named); the
// sandbox is asked after the process ended, before it is released.
func limitReached(ctx context.Context, name string, proc sandbox.Process, err error) error {
	lr, ok := proc.(sandbox.LimitReporter)
	if !ok || err == nil || outposterr.IsBudget(err) || outposterr.IsLimit(err) {
		return err
	}
	if c := outposterr.ClassOf(err); c != outposterr.Process && c != outposterr.Timeout {
		return err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, l := range lr.LimitsReached(pctx) {
		if l != sandbox.LimitPids {
			continue
		}
		// The failure it explains stays as text only: its class and its
		// retryable flag (a timeout's) would no longer be true.
		d := outposterr.DetailsOf(err)
		d.Limit, d.Retryable, d.Unavailable, d.ResetAt = sandbox.LimitPids, false, "", time.Time{}
		return &outposterr.Error{Class: outposterr.Process, Details: d, Cause: errors.New(strings.TrimPrefix(err.Error(), name+": ")),
			Message: name + ": the sandbox's limit on processes was reached (a fork was refused)"}
	}
	return err
}

// vanished makes a failure whose lease disappeared meanwhile — a container
// removed, a pod deleted or evicted (sandbox.Vanishing) — a sandbox failure
// worth retrying in a new lease: the CLI that "was killed", the restore
// that "failed", the installation that "broke" were the lease going away.
// Failures the lease's fate does not explain (a cancellation, a
// configuration error, a quota, a cap) stay as they are.
func vanished(ctx context.Context, name string, sb sandbox.Sandbox, err error) error {
	if err == nil || sb == nil || outposterr.IsQuota(err) || outposterr.IsBudget(err) {
		return err
	}
	if c := outposterr.ClassOf(err); c == outposterr.Aborted || c == outposterr.Configuration {
		return err
	}
	reason := sandbox.GoneReason(ctx, sb)
	if reason == "" {
		return err
	}
	// The failure it explains stays as text only: its class and details
	// (a process failure's exit status, an outage) would no longer be true.
	d := outposterr.Details{Agent: name, Retryable: true}
	return &outposterr.Error{Class: outposterr.Sandbox, Details: d, Cause: errors.New(strings.TrimPrefix(err.Error(), name+": ")),
		Message: name + ": the sandbox disappeared during the turn: " + reason}
}

// stopReason says why the harness, not the CLI, ended a turn.
type stopReason int

const (
	stopNone     stopReason = iota
	stopSettled             // the CLI lingered after its finished event
	stopCanceled            // the caller cancelled
	stopDeadline            // the turn deadline passed
	stopIdle                // the CLI printed nothing for the idle timeout
	stopQuota               // the CLI's retry notices proved a quota failure
	stopBudget              // the turn reached a cap of Limits (cost, turns)
	stopSteered             // a live message interrupts the CLI (interrupt-and-resume)
)

// verdict is everything classification looks at besides the collector.
type verdict struct {
	exit     sandbox.ExitStatus
	exited   bool
	stop     stopReason
	deadline time.Duration
	idle     time.Duration
	cause    error // the context error behind a stop, if any
}

// classify turns a finished turn into nil or an *outposterr.Error. It never
// looks at assistant text: only at the exit status, failure events, blocking
// quota events, retry notices and stderr.
func classify(c *collector, v verdict) error {
	name := c.adapter.Name()
	caps := c.adapter.Capabilities()
	d := outposterr.Details{Agent: name}
	if v.exited {
		d.Exited, d.ExitCode, d.Signal = true, v.exit.Code, v.exit.Signal
	}
	succeeded := len(c.failures) == 0 && (c.finishedOK() || (!caps.RequiresFinished && c.finished == nil)) &&
		(v.exit.Success() || v.stop == stopSettled || (c.finishedOK() && v.stop != stopNone))

	switch v.stop {
	case stopCanceled:
		if succeeded {
			return nil
		}
		return &outposterr.Error{Class: outposterr.Aborted, Message: name + ": turn cancelled", Details: d, Cause: v.cause}
	case stopDeadline:
		if succeeded {
			return nil
		}
		d.Retryable = true
		if r := c.outage(); r != "" {
			d.Unavailable = r
		}
		return &outposterr.Error{Class: outposterr.Timeout,
			Message: fmt.Sprintf("%s: turn exceeded its deadline of %s", name, v.deadline), Details: d, Cause: v.cause}
	case stopQuota:
		q := c.quotaChatter
		if structured := c.blockingReset(); !structured.IsZero() {
			q.resetAt = structured
		}
		qd := d
		qd.ResetAt = q.resetAt
		cause := &outposterr.Error{Class: outposterr.Process, Details: d,
			Message: name + ": stopped while the CLI retried a quota failure: " + q.text}
		return &outposterr.Error{Class: outposterr.Quota, Message: "quota", Details: qd, Cause: cause}
	case stopSteered:
		if succeeded {
			return nil
		}
		return &outposterr.Error{Class: outposterr.Aborted, Details: d,
			Message: name + ": interrupted to take a live message"}
	case stopBudget:
		d.Budget = c.over.reason
		return &outposterr.Error{Class: outposterr.Process, Details: d,
			Message: name + ": stopped by the harness: " + c.over.text}
	case stopIdle:
		d.Retryable = true
		if r := c.outage(); r != "" {
			d.Unavailable = r
		}
		return &outposterr.Error{Class: outposterr.Timeout,
			Message: fmt.Sprintf("%s: no output for %s (idle timeout)", name, v.idle), Details: d}
	}
	if succeeded {
		return nil
	}

	// The turn failed: describe it as a process failure, then reclassify.
	msg := c.failureText()
	switch {
	case v.exit.OOMKilled:
		d.Limit = sandbox.LimitMemory
		msg = "killed: out of memory" + suffix(msg)
	case msg != "":
	case c.finished != nil && !c.finished.OK:
		msg = "CLI reported failure" + suffix(c.finished.Reason)
	case v.exited && v.exit.Success() && caps.RequiresFinished && c.finished == nil:
		msg = "CLI exited 0 without its final event"
	case c.lastStderr != "":
		msg = c.lastStderr
	case v.exited:
		msg = "CLI " + v.exit.String()
	default:
		msg = "CLI did not run"
	}
	if v.exited && !v.exit.Success() && !strings.Contains(msg, v.exit.String()) {
		msg += " (" + v.exit.String() + ")"
	}
	perr := &outposterr.Error{Class: outposterr.Process, Message: name + ": " + msg, Details: d}
	if tl, ok := c.adapter.(adapters.TurnLimiter); ok && c.limits.MaxTurns > 0 && c.finished != nil && tl.TurnsExhausted(*c.finished) {
		// The CLI stopped itself at the cap it was given.
		perr.Details.Budget = "turns"
		perr.Message = fmt.Sprintf("%s: stopped at the cap of %d assistant turns", name, c.limits.MaxTurns)
		return perr
	}
	if em, ok := c.adapter.(adapters.ExitMapper); ok && v.exited && v.exit.Code > 0 {
		if err := classifyExit(c, perr, em.ExitMeaning(v.exit.Code), v.exit.Code); err != nil {
			return err
		}
	}

	// A resumed conversation the CLI cannot find is a session error, never
	// mistaken for a cancelled turn (a stop by the harness returned above).
	if sr, ok := c.adapter.(adapters.SessionRecognizer); ok {
		for _, f := range c.failures {
			if sr.SessionMissing(f.Text) {
				return &outposterr.Error{Class: outposterr.Session,
					Message: "conversation not found", Details: d, Cause: perr}
			}
		}
		if c.stderrSession != "" {
			return &outposterr.Error{Class: outposterr.Session, Message: "conversation not found: " + c.stderrSession, Details: d, Cause: perr}
		}
	}

	// Quota: the failure text, then the last blocking quota event, then stderr.
	if q, ok := c.quota(); ok {
		qd := d
		qd.ResetAt = q.resetAt
		// The process failure (the CLI's own words) is the cause; the
		// message only names the class, so the text is not repeated.
		if q.text != "" && !strings.Contains(perr.Message, q.text) {
			perr.Message += " [" + q.text + "]"
		}
		return &outposterr.Error{Class: outposterr.Quota, Message: "quota", Details: qd, Cause: perr}
	}
	if r := c.outage(); r != "" {
		perr.Details.Unavailable = r
		perr.Details.Retryable = true
	}
	if r := c.auth(); r != "" {
		perr.Details.Auth = r
	}
	return perr
}

// classifyExit classifies a failed turn by the meaning the adapter gives its
// exit code; nil when the code has none.
func classifyExit(c *collector, perr *outposterr.Error, meaning string, code int) error {
	why := fmt.Sprintf("exit %d", code)
	switch meaning {
	case "session":
		return &outposterr.Error{Class: outposterr.Session, Message: "conversation not found (" + why + ")", Details: perr.Details, Cause: perr}
	case "quota":
		q, _ := c.quota() // a reset, if any text gave one
		qd := perr.Details
		qd.ResetAt = q.resetAt
		return &outposterr.Error{Class: outposterr.Quota, Message: "quota", Details: qd, Cause: perr}
	case "unavailable":
		if r := c.outage(); r != "" {
			why = r
		}
		perr.Details.Unavailable, perr.Details.Retryable = why, true
		return perr
	case "auth":
		perr.Details.Auth = why
		return perr
	case "process":
		return perr
	}
	return nil
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// failureText is the last failure event's text, or "".
func (c *collector) failureText() string {
	for i := len(c.failures) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(c.failures[i].Text); t != "" {
			return t
		}
	}
	return ""
}

// quota finds the quota evidence of a failed turn.
func (c *collector) quota() (textMatch, bool) {
	var structured time.Time
	if c.blocking != nil && c.blocking.Quota != nil {
		structured = c.blocking.Quota.ResetAt
	}
	pick := func(m textMatch) textMatch {
		// Structured epochs beat times parsed from text.
		if !structured.IsZero() {
			m.resetAt = structured
		}
		return m
	}
	for i := len(c.failures) - 1; i >= 0; i-- {
		f := c.failures[i]
		if ok, reset := adapters.FailureQuota(c.adapter, f); ok {
			return pick(textMatch{text: f.Text, resetAt: reset, at: f.Time}), true
		}
	}
	if c.blocking != nil {
		text := c.blocking.Text
		reset := structured
		if ok, r := c.adapter.Quota(text, c.blocking.Time); ok && reset.IsZero() {
			reset = r
		}
		if text == "" {
			text = "rate limit " + c.blocking.Quota.Status
		}
		return textMatch{text: text, resetAt: reset, at: c.blocking.Time}, true
	}
	if c.stderrQuota != nil {
		return pick(*c.stderrQuota), true
	}
	return textMatch{}, false
}

// blockingReset is the reset of the last blocking quota event, or zero.
func (c *collector) blockingReset() time.Time {
	if c.blocking != nil && c.blocking.Quota != nil {
		return c.blocking.Quota.ResetAt
	}
	return time.Time{}
}

// outage names the outage behind a failed turn, or "".
func (c *collector) outage() string {
	for i := len(c.failures) - 1; i >= 0; i-- {
		f := c.failures[i]
		if r, ok := adapters.FailureUnavailable(c.adapter, f); ok {
			return r
		}
		if f.Failure != nil && (f.Failure.Status >= 500 || f.Failure.Status == 529) {
			return fmt.Sprintf("http %d", f.Failure.Status)
		}
	}
	if c.stderrOut != nil {
		return c.stderrOut.reason
	}
	// A CLI that kept retrying (Codex on a refused connection) names the
	// cause only in its retry notices.
	if c.lastRetry != nil {
		if r, ok := c.adapter.Unavailable(c.lastRetry.Reason); ok {
			return r
		}
		if c.lastRetry.Status >= 500 {
			return fmt.Sprintf("http %d", c.lastRetry.Status)
		}
	}
	return ""
}

// auth names the authentication failure behind a failed turn, or "".
func (c *collector) auth() string {
	for i := len(c.failures) - 1; i >= 0; i-- {
		f := c.failures[i]
		if r, ok := adapters.FailureAuth(c.adapter, f); ok {
			return r
		}
		if f.Failure != nil && f.Failure.Status == 401 {
			return "http 401"
		}
	}
	if c.stderrAuth != nil {
		return c.stderrAuth.reason
	}
	return ""
}

// contextStop maps a done context to a stop reason.
func contextStop(parent context.Context) stopReason {
	if parent.Err() != nil {
		return stopCanceled
	}
	return stopDeadline
}
