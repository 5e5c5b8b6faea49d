// Package outposterr defines the error classes every Outpost failure belongs to.
//
// An [Error] carries a [Class], a short message, [Details] (agent, exit status,
// the unavailable reason, the quota reset instant, whether a retry may help) and
// the cause it wraps. Every helper walks the whole cause chain, including errors
// joined with [errors.Join], so a caller can wrap an Outpost error with
// fmt.Errorf("...: %w") without losing its class. The helpers have one shape: a
// predicate (IsX(err) bool) and, where the class carries a value, an accessor:
//
//	IsQuota(err)        ResetAt(err) (time.Time, bool)
//	IsUnavailable(err)  UnavailableReason(err) string
//	IsAuth(err)         AuthReason(err) string
//	IsBudget(err)       BudgetReason(err) string
//	IsLimit(err)        LimitReason(err) string
//	IsRetryable(err)
//	Is(err, class)      ClassOf(err) Class   DetailsOf(err) Details
//
// [ClassOf] gives the outermost class. An error that carries no class at all is
// [Internal]: a bug or an unexpected failure inside Outpost, never blamed on
// the agent CLI. context.Canceled and context.DeadlineExceeded are the
// exceptions: they mean [Aborted] and [Timeout].
//
// Only a process failure is ever reclassified as quota; an outage (overload,
// 5xx, connection errors) stays a process failure with Details.Unavailable set,
// and an authentication failure stays a process failure with Details.Auth set.
// A turn the harness stopped because it reached a limit the caller set (a
// cost cap, a cap on assistant turns) is a process failure with
// Details.Budget set ("cost", "turns"): not retryable, not an outage, and
// not the CLI's fault; raise the limit to go on. A turn whose sandbox's
// resource limit stopped the CLI (an out-of-memory kill, a fork refused at
// the process limit) is a process failure with Details.Limit set ("memory",
// "pids"): not retryable without a larger sandbox.
//
// Exit codes are the outpost command's business, not this package's.
package outposterr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Class is the kind of an Outpost failure. The set is closed.
type Class string

// The error classes.
const (
	// Configuration: bad options, flags, inputs or missing credentials. Fix the call.
	Configuration Class = "configuration"
	// Process: the agent CLI failed (non-zero exit, failure event, missing final event).
	Process Class = "process"
	// Quota: the account hit a usage limit; wait until ResetAt if known.
	Quota Class = "quota"
	// Timeout: the turn exceeded its deadline or idle timeout.
	Timeout Class = "timeout"
	// Aborted: the caller cancelled the turn.
	Aborted Class = "aborted"
	// Sandbox: the sandbox (Docker engine, host exec) could not be used.
	Sandbox Class = "sandbox"
	// Bootstrap: installing or verifying a pinned CLI failed (integrity failures included).
	Bootstrap Class = "bootstrap"
	// Session: a conversation could not be found, restored or trusted.
	Session Class = "session"
	// Protocol: the CLI's output could not be understood or broke its contract.
	Protocol Class = "protocol"
	// Internal: a failure inside Outpost itself (a bug, a panic, an error
	// nothing classified). Not the agent CLI's fault; report it.
	Internal Class = "internal"
)

// Classes lists every class, in a stable order.
var Classes = []Class{Configuration, Process, Quota, Timeout, Aborted, Sandbox, Bootstrap, Session, Protocol, Internal}

// Details is the structured part of an [Error]. Zero values mean "not known".
type Details struct {
	// Agent is the adapter name ("claude", "codex", ...).
	Agent string `json:"agent,omitempty"`
	// ExitCode is the CLI's exit status; meaningful only when Exited is true.
	ExitCode int  `json:"exit_code,omitempty"`
	Exited   bool `json:"exited,omitempty"`
	// Signal names the signal that ended the CLI, when one did.
	Signal string `json:"signal,omitempty"`
	// Unavailable is set on process failures caused by an outage of the model
	// service (overload, 5xx, connection failure); it names the reason.
	Unavailable string `json:"unavailable,omitempty"`
	// Auth is set on process failures caused by missing or rejected credentials.
	Auth string `json:"auth,omitempty"`
	// Budget is set on process failures stopped by a caller's limit: "cost"
	// (a cost cap, or a cost that could not be known under one) or "turns"
	// (a cap on assistant turns).
	Budget string `json:"budget,omitempty"`
	// Limit is set on process failures where a resource limit of the
	// sandbox stopped the CLI: "memory" (an out-of-memory kill) or "pids"
	// (a fork refused at the limit on processes).
	Limit string `json:"limit,omitempty"`
	// ResetAt is when a quota resets, if the CLI said so.
	ResetAt time.Time `json:"reset_at,omitzero"`
	// Retryable says whether running the same turn again may succeed without
	// any change (outages, timeouts). Quota failures are not retryable before ResetAt.
	Retryable bool `json:"retryable,omitempty"`
}

// Error is an Outpost failure: a class, a message, details and a cause.
type Error struct {
	Class   Class
	Message string
	Details Details
	Cause   error
}

// Error renders "message: cause".
func (e *Error) Error() string {
	if e.Cause == nil {
		return e.Message
	}
	if e.Message == "" {
		return e.Cause.Error()
	}
	return e.Message + ": " + e.Cause.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// New returns an error of the given class.
func New(class Class, format string, args ...any) *Error {
	return &Error{Class: class, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of the given class wrapping cause. A nil cause gives nil.
func Wrap(class Class, cause error, format string, args ...any) error {
	if cause == nil {
		return nil
	}
	return &Error{Class: class, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// With returns a copy of e with details d merged over e's (non-zero fields of d win).
func (e *Error) With(d Details) *Error {
	c := *e
	c.Details = merge(c.Details, d)
	return &c
}

func merge(a, b Details) Details {
	if b.Agent != "" {
		a.Agent = b.Agent
	}
	if b.Exited {
		a.Exited, a.ExitCode = true, b.ExitCode
	}
	if b.Signal != "" {
		a.Signal = b.Signal
	}
	if b.Unavailable != "" {
		a.Unavailable = b.Unavailable
	}
	if b.Auth != "" {
		a.Auth = b.Auth
	}
	if b.Budget != "" {
		a.Budget = b.Budget
	}
	if b.Limit != "" {
		a.Limit = b.Limit
	}
	if !b.ResetAt.IsZero() {
		a.ResetAt = b.ResetAt
	}
	if b.Retryable {
		a.Retryable = true
	}
	return a
}

// maxDepth bounds chain walks so a cyclic or absurd chain cannot hang a caller.
const maxDepth = 32

// walk calls f on every error in err's chain (depth-first, outermost first)
// until f returns true.
func walk(err error, f func(error) bool) bool {
	var rec func(error, int) bool
	rec = func(e error, depth int) bool {
		if e == nil || depth > maxDepth {
			return false
		}
		if f(e) {
			return true
		}
		switch u := e.(type) { //nolint:errorlint // this is the bounded chain walk: it unwraps each link itself
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				if rec(c, depth+1) {
					return true
				}
			}
		case interface{ Unwrap() error }:
			return rec(u.Unwrap(), depth+1)
		}
		return false
	}
	return rec(err, 0)
}

// find returns the outermost *Error in err's chain.
func find(err error) *Error {
	var out *Error
	walk(err, func(e error) bool {
		if oe, ok := e.(*Error); ok { //nolint:errorlint // walk unwraps the chain itself and looks at each link
			out = oe
			return true
		}
		return false
	})
	return out
}

// As returns the outermost *Error in err's chain.
func As(err error) (*Error, bool) {
	e := find(err)
	return e, e != nil
}

// ClassOf returns the class of the outermost Outpost error in err's chain.
// A bare context.Canceled is [Aborted], a bare context.DeadlineExceeded is
// [Timeout], any other foreign error is [Internal]; nil gives "".
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	if e := find(err); e != nil {
		return e.Class
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Aborted
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Internal
}

// Is reports whether any error in err's chain is an Outpost error of class c.
func Is(err error, c Class) bool {
	return walk(err, func(e error) bool {
		oe, ok := e.(*Error) //nolint:errorlint // walk unwraps the chain itself and looks at each link
		return ok && oe.Class == c
	})
}

// IsQuota reports whether err is, or wraps, a quota failure.
func IsQuota(err error) bool { return Is(err, Quota) }

// ResetAt returns the first known quota reset instant in err's chain.
func ResetAt(err error) (time.Time, bool) {
	var t time.Time
	walk(err, func(e error) bool {
		if oe, ok := e.(*Error); ok && !oe.Details.ResetAt.IsZero() { //nolint:errorlint // walk unwraps the chain itself and looks at each link
			t = oe.Details.ResetAt
			return true
		}
		return false
	})
	return t, !t.IsZero()
}

// IsUnavailable reports whether err's chain records an outage of the model
// service (a process failure with Details.Unavailable set).
func IsUnavailable(err error) bool { return UnavailableReason(err) != "" }

// UnavailableReason returns the outage reason recorded anywhere in err's
// chain ("overloaded", "http 503"), or "".
func UnavailableReason(err error) string {
	return firstDetail(err, func(d Details) string { return d.Unavailable })
}

// IsAuth reports whether err's chain records an authentication failure.
func IsAuth(err error) bool { return AuthReason(err) != "" }

// AuthReason returns the authentication failure recorded anywhere in err's
// chain ("http 401", "not logged in"), or "".
func AuthReason(err error) string {
	return firstDetail(err, func(d Details) string { return d.Auth })
}

// IsBudget reports whether err's chain records a stop by a caller's limit.
func IsBudget(err error) bool { return BudgetReason(err) != "" }

// BudgetReason returns the limit recorded anywhere in err's chain ("cost",
// "turns"), or "".
func BudgetReason(err error) string {
	return firstDetail(err, func(d Details) string { return d.Budget })
}

// IsLimit reports whether err's chain records a sandbox resource limit that
// stopped the CLI.
func IsLimit(err error) bool { return LimitReason(err) != "" }

// LimitReason returns the sandbox resource limit recorded anywhere in err's
// chain ("memory", "pids"), or "".
func LimitReason(err error) string {
	return firstDetail(err, func(d Details) string { return d.Limit })
}

// firstDetail returns the first non-empty value f reads from the Outpost
// errors in err's chain, outermost first.
func firstDetail(err error, f func(Details) string) string {
	var r string
	walk(err, func(e error) bool {
		if oe, ok := e.(*Error); ok { //nolint:errorlint // walk unwraps the chain itself and looks at each link
			r = f(oe.Details)
		}
		return r != ""
	})
	return r
}

// IsRetryable reports whether err's chain says running the same turn again
// may help.
func IsRetryable(err error) bool {
	return walk(err, func(e error) bool {
		oe, ok := e.(*Error) //nolint:errorlint // walk unwraps the chain itself and looks at each link
		return ok && oe.Details.Retryable
	})
}

// DetailsOf returns the details of the outermost Outpost error, merged with
// those of the Outpost errors it wraps (outer values win).
func DetailsOf(err error) Details {
	var all []Details
	walk(err, func(e error) bool {
		if oe, ok := e.(*Error); ok { //nolint:errorlint // walk unwraps the chain itself and looks at each link
			all = append(all, oe.Details)
		}
		return false
	})
	var d Details
	for i := len(all) - 1; i >= 0; i-- {
		d = merge(d, all[i])
	}
	return d
}

// ParseClass returns the class named s, if it is one.
func ParseClass(s string) (Class, bool) {
	for _, c := range Classes {
		if string(c) == strings.ToLower(strings.TrimSpace(s)) {
			return c, true
		}
	}
	return "", false
}

// Panic returns the [Internal] error for a panic recovered inside Outpost,
// so a bug surfaces as Outpost's failure with its own class, not the agent's.
func Panic(v any) *Error {
	e := &Error{Class: Internal, Message: fmt.Sprintf("internal error (a bug in Outpost; please report it): panic: %v", v)}
	if err, ok := v.(error); ok {
		e.Cause = err
		e.Message = "internal error (a bug in Outpost; please report it): panic"
	}
	return e
}
