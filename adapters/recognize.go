package adapters

import (
	"regexp"
	"strings"
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
