package procowner

import (
	"os"
	"strconv"
	"strings"
)

// Start returns the start time of pid (clock ticks since boot, field 22 of
// /proc/<pid>/stat), or "" when it cannot be read.
func Start(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is parenthesised and may contain spaces:
	// count fields after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
