package adapters_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
)

// structuredFake reads "quota" in its words, and its Code field as the class.
func structuredFake(structured bool) *fake {
	rec := adapters.Recognition{
		Wordings: []adapters.Wordings{{
			NotQuota:    []*regexp.Regexp{regexp.MustCompile(`not your limit`)},
			Quota:       []*regexp.Regexp{regexp.MustCompile(`quota`)},
			Unavailable: []adapters.Reason{{RE: regexp.MustCompile(`overloaded|not your limit`), Name: "overloaded"}},
			Auth:        []adapters.Reason{{RE: regexp.MustCompile(`bad key`), Name: "bad key"}},
		}},
		Reset: func(string, time.Time) (time.Time, bool) { return time.Unix(100, 0), true },
	}
	if structured {
		rec.Structured = func(f adapters.FailureDetail) adapters.Verdict {
			return adapters.Verdict{Class: adapters.Class(f.Code), Reason: "by fields"}
		}
	}
	return adapters.Build[fake]("fake", adapters.Capabilities{}, adapters.NewRecognizer(rec))
}

func failure(code, text string) adapters.Event {
	return adapters.Event{Kind: adapters.KindFailure, Text: text, Failure: &adapters.FailureDetail{Code: code}}
}

func TestStructuredFieldsFirst(t *testing.T) {
	a := structuredFake(true)

	// The fields decide the class whatever the words say.
	ok, reset := adapters.FailureQuota(a, failure("quota", "words nobody wrote a pattern for"))
	assert.True(t, ok)
	assert.True(t, reset.IsZero(), "a reset comes only from words that read as quota")
	ok, reset = adapters.FailureQuota(a, failure("quota", "quota gone"))
	assert.True(t, ok)
	assert.Equal(t, time.Unix(100, 0), reset, "the words give the reset")
	ok, _ = adapters.FailureQuota(a, failure("auth", "quota gone"))
	assert.False(t, ok, "fields that say auth are not quota, whatever the words")
	_, ok = adapters.FailureUnavailable(a, failure("auth", "overloaded"))
	assert.False(t, ok)

	// The words name the reason when they read as the same class.
	name, ok := adapters.FailureUnavailable(a, failure("unavailable", "overloaded"))
	assert.True(t, ok)
	assert.Equal(t, "overloaded", name)
	name, _ = adapters.FailureUnavailable(a, failure("unavailable", "something"))
	assert.Equal(t, "by fields", name)
	name, ok = adapters.FailureAuth(a, failure("auth", "bad key"))
	assert.True(t, ok)
	assert.Equal(t, "bad key", name)

	// Fields that decide nothing leave the words to decide.
	ok, _ = adapters.FailureQuota(a, failure("", "quota gone"))
	assert.True(t, ok)
	name, _ = adapters.FailureAuth(a, failure("", "bad key"))
	assert.Equal(t, "bad key", name)
	ok, _ = adapters.FailureQuota(a, adapters.Event{Kind: adapters.KindFailure, Text: "quota"})
	assert.True(t, ok, "a failure without detail is read by its words")

	// Words the CLI says are no quota veto a quota verdict: the words decide.
	ok, _ = adapters.FailureQuota(a, failure("quota", "rate limited (not your limit)"))
	assert.False(t, ok)
	name, ok = adapters.FailureUnavailable(a, failure("quota", "rate limited (not your limit)"))
	assert.True(t, ok)
	assert.Equal(t, "overloaded", name)
}

func TestWordsOnlyWithoutStructure(t *testing.T) {
	a := structuredFake(false)
	ok, _ := adapters.FailureQuota(a, failure("quota", "something"))
	assert.False(t, ok)
	ok, _ = adapters.FailureQuota(a, failure("auth", "quota"))
	assert.True(t, ok)
}
