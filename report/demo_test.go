package report_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/report"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

// TestDemo writes sample reports under OUTPOST_REPORT_DEMO (skipped when unset).
func TestDemo(t *testing.T) {
	out := os.Getenv("OUTPOST_REPORT_DEMO")
	if out == "" {
		t.Skip("set OUTPOST_REPORT_DEMO=DIR to write sample reports")
	}
	dir := filepath.Join(out, "run")
	require.NoError(t, os.RemoveAll(dir))
	_, err := runrectest.Sample(dir, os.DirFS(".."), runrectest.Options{Hostile: os.Getenv("HOSTILE") != ""})
	require.NoError(t, err)
	r, err := report.Load(dir)
	require.NoError(t, err)
	for _, f := range report.Formats {
		fh, err := os.Create(filepath.Join(out, "report."+f))
		require.NoError(t, err)
		require.NoError(t, r.Render(fh, f))
		require.NoError(t, fh.Close())
	}
}
