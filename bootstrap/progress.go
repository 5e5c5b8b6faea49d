package bootstrap

import (
	"fmt"
	"io"
	"sync"
)

// ProgressLines returns an [Options.Progress] function that writes one line
// per phase and per tenth of a download to w ("claude 2.1.328 (linux-x64):
// download 40% (69.0/172.3 MB)"), for logs and non-terminal output; a
// terminal progress bar is the caller's business. It is safe for
// concurrent downloads.
func ProgressLines(w io.Writer) func(Progress) {
	var mu sync.Mutex
	last := map[string]string{}
	return func(p Progress) {
		key := p.Name + "@" + p.Version + "@" + string(p.Platform)
		step := p.Phase
		if p.Phase == "download" && p.Total > 0 {
			step = fmt.Sprintf("download %d%%", p.Done*10/p.Total*10)
		}
		mu.Lock()
		defer mu.Unlock()
		if last[key] == step {
			return
		}
		last[key] = step
		if p.Phase == "done" {
			delete(last, key)
		}
		line := fmt.Sprintf("%s %s (%s): %s", p.Name, p.Version, p.Platform, step)
		if p.Phase == "download" {
			if p.Total > 0 {
				line += fmt.Sprintf(" (%.1f/%.1f MB)", float64(p.Done)/1e6, float64(p.Total)/1e6)
			} else {
				line += fmt.Sprintf(" (%.1f MB)", float64(p.Done)/1e6)
			}
		}
		_, _ = fmt.Fprintln(w, line)
	}
}
