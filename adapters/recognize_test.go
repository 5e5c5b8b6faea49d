package adapters

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMatchReason(t *testing.T) {
	list := []Reason{
		{regexp.MustCompile(`overloaded`), "overloaded"},
		{regexp.MustCompile(`(?:status (\d+))|(?:http (\d+))`), "http $1"},
	}
	for text, want := range map[string]string{
		"model overloaded": "overloaded",
		"status 503":       "http 503",
		"http 502 bad":     "http 502", // the first non-empty group
		"nothing":          "",
	} {
		got, ok := MatchReason(list, text)
		if got != want || ok != (want != "") {
			t.Errorf("MatchReason(%q) = %q, %v; want %q", text, got, ok, want)
		}
	}
}

func TestRecognizer(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	r := NewRecognizer(Recognition{
		Chatter: regexp.MustCompile(`retrying`),
		Wordings: []Wordings{
			{
				NotQuota:    []*regexp.Regexp{regexp.MustCompile(`not your limit`)},
				Quota:       []*regexp.Regexp{regexp.MustCompile(`you've hit your limit`)},
				Unavailable: []Reason{{regexp.MustCompile(`overloaded`), "overloaded"}},
				Auth:        []Reason{{regexp.MustCompile(`bad key`), "bad key"}},
			},
			{ // a provider's, consulted second
				Quota:       []*regexp.Regexp{regexp.MustCompile(`credit balance`)},
				Unavailable: []Reason{{regexp.MustCompile(`overloaded|http (5\d\d)`), "provider $1"}},
				Auth:        []Reason{{regexp.MustCompile(`401`), "http 401"}},
			},
		},
		Reset: func(text string, at time.Time) (time.Time, bool) { return at.Add(time.Hour), true },
	})
	ok, reset := r.Quota("You’ve hit your LIMIT", at)
	assert.True(t, ok, "typographic quotes fold, case folds")
	assert.Equal(t, at.Add(time.Hour), reset)
	ok, _ = r.Quota("Credit balance too low", at)
	assert.True(t, ok, "every wordings' quota patterns count")
	for _, text := range []string{"", "you've hit your limit, retrying", "you've hit your limit (not your limit)"} {
		ok, reset = r.Quota(text, at)
		assert.False(t, ok, text)
		assert.True(t, reset.IsZero(), text)
	}
	name, ok := r.Unavailable("Overloaded")
	assert.True(t, ok)
	assert.Equal(t, "overloaded", name, "the first wordings name the reason")
	name, _ = r.Unavailable("http 503")
	assert.Equal(t, "provider 503", name)
	_, ok = r.Unavailable("overloaded, retrying")
	assert.False(t, ok, "chatter is no verdict")
	name, ok = r.Auth("401 bad key")
	assert.True(t, ok)
	assert.Equal(t, "bad key", name)
	_, ok = r.Auth("")
	assert.False(t, ok)

	// Exclusive: an outage word inside a quota or auth text is not an outage.
	x := NewRecognizer(Recognition{Exclusive: true, Wordings: []Wordings{{
		Quota:       []*regexp.Regexp{regexp.MustCompile(`quota`)},
		Unavailable: []Reason{{regexp.MustCompile(`server error`), "server error"}},
		Auth:        []Reason{{regexp.MustCompile(`401`), "http 401"}},
	}}})
	_, ok = x.Unavailable("quota: server error")
	assert.False(t, ok)
	_, ok = x.Unavailable("401 server error")
	assert.False(t, ok)
	_, ok = x.Unavailable("server error")
	assert.True(t, ok)
}

func TestRecognizerScansAtMostMaxScan(t *testing.T) {
	r := NewRecognizer(Recognition{Wordings: []Wordings{{Quota: []*regexp.Regexp{regexp.MustCompile(`credit balance`)}}}})
	huge := strings.Repeat("x", MaxScan)
	ok, _ := r.Quota(huge+"credit balance", time.Time{})
	assert.False(t, ok)
	ok, _ = r.Quota("credit balance"+huge, time.Time{})
	assert.True(t, ok)
}
