package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestFlag adds the closest flag of cmd to an unknown long flag's
// error ("unknown flag: --agnet (did you mean --agent?)"), as cobra does for
// mistyped commands. Only the flag's name is in pflag's error, never a
// value given with it.
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || name == "" {
		return err
	}
	best, bestDist := "", maxFlagDistance+1
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1) // a truncated name: --concurr for --concurrency
		}
		if d < bestDist || (d == bestDist && f.Name < best) {
			best, bestDist = f.Name, d
		}
	})
	if best == "" || bestDist >= len(name) {
		return err
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

// durationUnit adds to a duration flag's error for a bare number what a
// duration looks like: Go's "missing unit in duration" does not say.
func durationUnit(err error) error {
	if !strings.Contains(err.Error(), "missing unit in duration") {
		return err
	}
	return fmt.Errorf("%w (durations take a unit: 90s, 30m, 1h30m)", err)
}

// maxFlagDistance is the largest edit distance a suggestion may have.
const maxFlagDistance = 2

// editDistance is the Levenshtein distance between a and b, in bytes (flag
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
