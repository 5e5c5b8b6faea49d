package adapters

import (
	"regexp"
	"testing"
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
