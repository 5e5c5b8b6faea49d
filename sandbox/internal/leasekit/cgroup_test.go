package leasekit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadCounter: the first readable file holding the key gives its
// value; none readable gives -1 (the script runs here as it would in a
// lease).
func TestReadCounter(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "pids.events")
	require.NoError(t, os.WriteFile(events, []byte("max 17\n"), 0o600))
	run := func(ctx context.Context, args []string) ([]byte, error) {
		return exec.CommandContext(ctx, args[0], args[1:]...).Output()
	}
	n, err := ReadCounter(context.Background(), run, []string{"max", filepath.Join(dir, "missing"), events})
	require.NoError(t, err)
	assert.Equal(t, int64(17), n)
	n, err = ReadCounter(context.Background(), run, []string{"oom_kill", events})
	require.NoError(t, err)
	assert.Equal(t, int64(-1), n)
}
