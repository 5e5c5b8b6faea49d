package credentials

import (
	"slices"
	"strings"
)

// reservedVars are set by Outpost or the sandbox for every CLI;
// reservedPrefixes name families that decide which code a process loads or
// where it keeps files.
var (
	reservedVars     = []string{"HOME", "PATH", "PWD", "SHELL", "USER", "LOGNAME", "TMPDIR", "TZ"}
	reservedPrefixes = []string{"XDG_", "LD_", "OUTPOST_"}
)

// Reserved reports whether name is a variable a project cannot declare or
// forward: one Outpost or the sandbox sets for every CLI (HOME, PATH, PWD,
// SHELL, USER, LOGNAME, TMPDIR, TZ), one that moves a CLI's files away from
// where Outpost captures them (XDG_*, and the CLIs' own variables, given as
// relocation: the registry's RelocationVars, such as CLAUDE_CONFIG_DIR), one
// that makes the dynamic loader run other code (LD_*), or Outpost's own
// (OUTPOST_*).
func Reserved(name string, relocation ...string) bool {
	if slices.Contains(reservedVars, name) || slices.Contains(relocation, name) {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ShownName is s as an error may quote a string given where a variable's
// name belongs: "NAME=value" shows as "NAME=…", for the value may be a
// secret.
func ShownName(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=…"
	}
	return s
}
