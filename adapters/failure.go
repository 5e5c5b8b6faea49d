package adapters

import "time"

// Class is the class a recognizer gives a failure.
type Class string

// The classes a recognizer gives.
const (
	ClassQuota       Class = "quota"
	ClassUnavailable Class = "unavailable"
	ClassAuth        Class = "auth"
)

// Verdict is what a failure's structured fields say.
type Verdict struct {
	// Class is the failure's class; empty when the fields decide nothing
	// and the words must.
	Class Class
	// Reason names an outage or an authentication failure ("overloaded",
	// "http 503", "authentication failed"). The failure's words name it
	// instead when they read as the same class.
	Reason string
}

// FailureRecognizer is implemented by adapters whose CLI reports structured
// fields on its failures ([FailureDetail]: the HTTP status, its own code,
// the provider's error type and code). Those fields decide a failure's class
// before its words: the words ([Adapter.Quota], Unavailable, Auth) decide
// only when the fields say nothing, and otherwise only refine the verdict
// (a quota's reset, the name of an outage). text is the failure's text,
// which may veto a quota verdict the CLI's wordings say is no quota (a
// server throttle reported as a 429). Pure.
type FailureRecognizer interface {
	RecognizeFailure(f FailureDetail, text string) Verdict
}

// verdictOf is the structured verdict on failure event ev, if a has one.
func verdictOf(a Adapter, ev Event) Verdict {
	fr, ok := a.(FailureRecognizer)
	if !ok || ev.Failure == nil {
		return Verdict{}
	}
	return fr.RecognizeFailure(*ev.Failure, ev.Text)
}

// FailureQuota reports whether failure event ev is a quota failure and when
// it resets: by its structured fields first ([FailureRecognizer]), by its
// words only when the fields decide nothing. The reset always comes from the
// words (zero when they give none).
func FailureQuota(a Adapter, ev Event) (bool, time.Time) {
	switch verdictOf(a, ev).Class {
	case "":
		return a.Quota(ev.Text, ev.Time)
	case ClassQuota:
		_, reset := a.Quota(ev.Text, ev.Time)
		return true, reset
	}
	return false, time.Time{}
}

// FailureUnavailable reports whether failure event ev is an outage of the
// model service and names it, structured fields first as for [FailureQuota].
func FailureUnavailable(a Adapter, ev Event) (string, bool) {
	return refine(verdictOf(a, ev), ClassUnavailable, a.Unavailable, ev.Text)
}

// FailureAuth reports whether failure event ev is an authentication failure
// and names it, structured fields first as for [FailureQuota].
func FailureAuth(a Adapter, ev Event) (string, bool) {
	return refine(verdictOf(a, ev), ClassAuth, a.Auth, ev.Text)
}

// refine applies the words to a verdict for class c: they decide when the
// verdict is empty and name the reason when it is c.
func refine(v Verdict, c Class, words func(string) (string, bool), text string) (string, bool) {
	switch v.Class {
	case "":
		return words(text)
	case c:
		if name, ok := words(text); ok {
			return name, true
		}
		return v.Reason, true
	}
	return "", false
}
