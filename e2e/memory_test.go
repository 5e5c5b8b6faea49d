package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// floodBytes is how much answer text the flood driver prints: 0.8 GiB.
const floodBytes = 858993459

// maxFloodGrowth bounds how much more resident memory outpost uses while a
// CLI floods it than for a one-line answer (issue: memory must not follow
// what a CLI prints); maxFloodRSS bounds the whole (the hostile-input
// target).
const (
	maxFloodGrowth = 40 << 20
	maxFloodRSS    = 64 << 20
)

var maxRSSRE = regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`)

// commandPeakRSS runs a command under GNU time and returns its peak resident set size.
func commandPeakRSS(t *testing.T, dir string, args ...string) (int64, string) {
	t.Helper()
	timeBin := "/usr/bin/time"
	if _, err := os.Stat(timeBin); err != nil {
		testenv.Missing(t, testenv.RequireToolsEnv, "GNU time (Debian package time)")
	}
	cmd := exec.Command(timeBin, append([]string{"-v"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	cmd.Stdout = devnull
	require.NoError(t, cmd.Run(), stderr.String())
	m := maxRSSRE.FindStringSubmatch(stderr.String())
	require.NotNil(t, m, stderr.String())
	kb, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return kb << 10, stderr.String()
}

// TestFloodKeepsMemoryBounded: a CLI printing 0.8 GiB of answer text
// through one turn costs outpost at most maxFloodGrowth more peak RSS than a
// one-line answer, and stays under maxFloodRSS (the answer is bounded and
// marked truncated). The figures are in BENCHMARKS.md.
func TestFloodKeepsMemoryBounded(t *testing.T) {
	testenv.Short(t)
	bin := buildOutpost(t)
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "flood.json"), []byte(`{"id":"flood","binary":"sh",
		"args":["-c","yes 'MARK-flood the quick brown fox jumps over the lazy dog' | head -c `+strconv.Itoa(floodBytes)+`"],
		"output":{"mode":"text"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "one.json"), []byte(`{"id":"one","binary":"sh",
		"args":["-c","echo MARK-one line"],"output":{"mode":"text"}}`), 0o644))
	base, _ := commandPeakRSS(t, ws, bin, "run", "--agent", "one", "--sandbox", "host", "--no-store", "--json", "one")
	rss, _ := commandPeakRSS(t, ws, bin, "run", "--agent", "flood", "--sandbox", "host", "--no-store", "--json", "flood")
	t.Logf("peak RSS of outpost run: %.1f MiB with one line of answer, %.1f MiB with %d MiB of answer text",
		float64(base)/(1<<20), float64(rss)/(1<<20), floodBytes>>20)
	assert.LessOrEqual(t, rss-base, int64(maxFloodGrowth), "the flood's share of memory")
	assert.LessOrEqual(t, rss, int64(maxFloodRSS))
}
