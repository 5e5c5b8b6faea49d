// Package shquote quotes words for a POSIX shell (sh -c, eval, a command
// line a person copies).
package shquote

import "strings"

// Quote returns s as one word in single quotes, each single quote in s
// written as '\” (end the quoting, an escaped quote, quote again). It is
// right in any position, a command's first word included.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Arg returns s bare when it is a non-empty run of letters, digits and
// -_./:=@+, (which a shell reads back as that one word), else [Quote]d.
// It is for an argument after the command name: a bare first word that
// holds "=" would be an assignment.
func Arg(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return Quote(s)
}
