package credentials

import "strings"

// reservedVars are set by Outpost or the sandbox for every CLI, or decide
// where a CLI keeps its files; reservedPrefixes name families that decide
// which code a process loads or where it keeps files.
var (
	reservedVars = []string{"HOME", "PATH", "PWD", "SHELL", "USER", "LOGNAME", "TMPDIR", "TZ",
		"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"}
	reservedPrefixes = []string{"XDG_", "LD_", "OUTPOST_"}
)

// Reserved reports whether name is a variable a project cannot declare or
// forward: one Outpost or the sandbox sets for every CLI (HOME, PATH, PWD,
// SHELL, USER, LOGNAME, TMPDIR, TZ), one that moves a CLI's files away from
// where Outpost captures them (CLAUDE_CONFIG_DIR, CODEX_HOME, COPILOT_HOME,
// XDG_*), one that makes the dynamic loader run other code (LD_*), or
// Outpost's own (OUTPOST_*).
func Reserved(name string) bool {
	for _, r := range reservedVars {
		if name == r {
			return true
		}
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
