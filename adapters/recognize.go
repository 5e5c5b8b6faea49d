package adapters

import (
	"regexp"
	"strings"
	"time"
)

// Reason is one recognizer pattern and the reason it names. "$1" in Name is
// replaced by the first non-empty capture group of the match.
type Reason struct {
	RE   *regexp.Regexp
	Name string
}

// MatchReason returns the name of the first pattern in list that matches
// text (adapters pass their normalized text).
func MatchReason(list []Reason, text string) (string, bool) {
	for _, r := range list {
		m := r.RE.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		name := r.Name
		if strings.Contains(name, "$1") {
			group := ""
			for _, g := range m[1:] {
				if g != "" {
					group = g
					break
				}
			}
			name = strings.ReplaceAll(name, "$1", group)
		}
		return name, true
	}
	return "", false
}

// MaxScan bounds the text a recognizer looks at, in bytes.
const MaxScan = 64 << 10

// Clip returns the first [MaxScan] bytes of s.
func Clip(s string) string {
	if len(s) > MaxScan {
		return s[:MaxScan]
	}
	return s
}

// folder folds the typographic variants CLIs print (’ and ', … and "...",
// ∙ and •  and ·), so one pattern matches every wording of a family.
var folder = strings.NewReplacer("’", "'", "‘", "'", "…", "...", "∙", "·", "•", "·")

// Normalize is the text recognizer patterns match: the first [MaxScan]
// bytes, typographic variants folded, lower-cased.
func Normalize(s string) string { return strings.ToLower(folder.Replace(Clip(s))) }

// Wordings are the failure texts of one family: one CLI's own, or one model
// provider's as a CLI relays them. Patterns match [Normalize]d text.
type Wordings struct {
	// NotQuota are texts that look like a limit but are not the account's
	// quota (a warning, a context overflow, a server throttle): they veto
	// every quota verdict.
	NotQuota []*regexp.Regexp
	// Quota are quota and usage-limit texts.
	Quota []*regexp.Regexp
	// Unavailable name outages of the model service.
	Unavailable []Reason
	// Auth name authentication failures.
	Auth []Reason
}

// Recognition is what a [Recognizer] is built from: one CLI's wordings and
// the few ways CLIs differ in reading them.
type Recognition struct {
	// Chatter matches the CLI's own retry notices, which are never a verdict.
	Chatter *regexp.Regexp
	// Wordings are consulted in order; for Unavailable and Auth the first
	// pattern that matches names the reason. A CLI lists its own wordings
	// first and the provider bodies it relays after them.
	Wordings []Wordings
	// Reset finds when a quota text resets, resolved against at, the instant
	// the text was seen; nil: the CLI never says.
	Reset func(text string, at time.Time) (time.Time, bool)
	// Exclusive makes Unavailable say nothing of a text that reads as quota
	// or as an authentication failure.
	Exclusive bool
	// Structured classifies a failure by the fields its CLI reports; nil:
	// the CLI reports none worth reading.
	Structured func(f FailureDetail) Verdict
}

// Recognizer holds the quota, outage and authentication recognizers of one
// CLI. A built-in adapter embeds one (built once with [NewRecognizer]): its
// methods are the adapter's Quota, Unavailable and Auth, which look at the
// [Normalize]d text and say nothing of an empty text or of retry chatter,
// and RecognizeFailure ([FailureRecognizer]), which reads a failure's
// structured fields. It is immutable and safe for concurrent use.
type Recognizer struct {
	r Recognition
}

// NewRecognizer builds a recognizer. r must not be changed afterwards.
func NewRecognizer(r Recognition) *Recognizer { return &Recognizer{r: r} }

// Quota reports whether text is a quota or usage-limit failure and, when the
// text says so, when it resets (resolved against at, the instant the text
// was seen). A NotQuota text never is.
func (r *Recognizer) Quota(text string, at time.Time) (bool, time.Time) {
	n, ok := r.verdictText(text)
	if !ok || !r.quota(n) {
		return false, time.Time{}
	}
	var t time.Time
	if r.r.Reset != nil {
		t, _ = r.r.Reset(Clip(text), at)
	}
	return true, t
}

// quota reports whether normalized text n reads as quota.
func (r *Recognizer) quota(n string) bool {
	if r.notQuota(n) {
		return false
	}
	for _, w := range r.r.Wordings {
		for _, re := range w.Quota {
			if re.MatchString(n) {
				return true
			}
		}
	}
	return false
}

func (r *Recognizer) notQuota(n string) bool {
	for _, w := range r.r.Wordings {
		for _, re := range w.NotQuota {
			if re.MatchString(n) {
				return true
			}
		}
	}
	return false
}

// verdictText normalizes text; ok is false for an empty text or retry
// chatter, which are never a verdict.
func (r *Recognizer) verdictText(text string) (n string, ok bool) {
	if text == "" {
		return "", false
	}
	n = Normalize(text)
	return n, r.r.Chatter == nil || !r.r.Chatter.MatchString(n)
}

// Unavailable reports whether text is an outage of the model service and
// names the reason.
func (r *Recognizer) Unavailable(text string) (string, bool) {
	n, ok := r.verdictText(text)
	if !ok {
		return "", false
	}
	if r.r.Exclusive {
		if _, ok := r.auth(n); ok || r.quota(n) {
			return "", false
		}
	}
	for _, w := range r.r.Wordings {
		if name, ok := MatchReason(w.Unavailable, n); ok {
			return name, true
		}
	}
	return "", false
}

// Auth reports whether text is an authentication failure and names it.
func (r *Recognizer) Auth(text string) (string, bool) {
	n, ok := r.verdictText(text)
	if !ok {
		return "", false
	}
	return r.auth(n)
}

func (r *Recognizer) auth(n string) (string, bool) {
	for _, w := range r.r.Wordings {
		if name, ok := MatchReason(w.Auth, n); ok {
			return name, true
		}
	}
	return "", false
}

// RecognizeFailure implements [FailureRecognizer] with the Structured
// classifier. A quota verdict stands unless text is one the wordings call
// no quota (NotQuota): then the words decide.
func (r *Recognizer) RecognizeFailure(f FailureDetail, text string) Verdict {
	if r.r.Structured == nil {
		return Verdict{}
	}
	v := r.r.Structured(f)
	if v.Class == ClassQuota && r.notQuota(Normalize(text)) {
		return Verdict{}
	}
	return v
}
