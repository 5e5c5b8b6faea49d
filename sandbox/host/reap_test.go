package host_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// TestReap: lease directories of dead owners (and unjudgeable ones past
// the grace) are removed; live leases, links and foreign directories are
// left alone; a dry run removes nothing.
func TestReap(t *testing.T) {
	tmp := t.TempDir()
	p := host.New(host.Options{Env: baseEnv(), TempDir: tmp})
	live := acquire(t, p, sandbox.Spec{})

	host_, _ := os.Hostname()
	mk := func(name string, owner map[string]any) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "home", ".claude"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "home", ".claude", "transcript.jsonl"), []byte("MARK"), 0o600))
		if owner != nil {
			b, _ := json.Marshal(owner)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "owner.json"), b, 0o600))
		}
		return dir
	}
	dead := mk("outpost-host-dead", map[string]any{"pid": deadPID(t), "host": host_, "created": time.Now()})
	foreign := mk("outpost-host-foreign", map[string]any{"pid": 1, "host": "another-machine", "created": time.Now()})
	old := mk("outpost-host-old", nil)
	past := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(tmp, "outpost-host-link")))
	other := mk("unrelated-dir", map[string]any{"pid": deadPID(t), "host": host_})

	got, err := host.Reap(context.Background(), host.ReapOptions{TempDir: tmp, ReapOptions: sandbox.ReapOptions{DryRun: true}})
	require.NoError(t, err)
	paths := func(los []host.Leftover) []string {
		var out []string
		for _, l := range los {
			out = append(out, l.Path)
		}
		return out
	}
	assert.ElementsMatch(t, []string{dead, old}, paths(got))
	for _, l := range got {
		assert.False(t, l.Removed)
		assert.DirExists(t, l.Path)
	}

	got, err = host.Reap(context.Background(), host.ReapOptions{TempDir: tmp})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{dead, old}, paths(got))
	for _, l := range got {
		assert.True(t, l.Removed)
		assert.NoDirExists(t, l.Path)
		assert.NotEmpty(t, l.Reason)
	}
	assert.DirExists(t, foreign, "another host's lease is younger than the grace")
	assert.DirExists(t, other, "not a lease directory")
	assert.FileExists(t, filepath.Join(outside, "keep"), "a link is never followed")
	assert.DirExists(t, filepath.Join(tmp, live.ID()), "a live owner's lease is kept")

	// Another user's lease directory is never touched.
	if os.Geteuid() == 0 {
		theirs := mk("outpost-host-theirs", map[string]any{"pid": deadPID(t), "host": host_})
		require.NoError(t, os.Chown(theirs, 4242, 4242))
		got, err = host.Reap(context.Background(), host.ReapOptions{TempDir: tmp})
		require.NoError(t, err)
		assert.Empty(t, got)
		assert.DirExists(t, theirs)
	}

	_, err = host.Reap(context.Background(), host.ReapOptions{TempDir: filepath.Join(tmp, "missing")})
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err))
}

// TestReleaseAll: the provider releases every lease it still holds.
func TestReleaseAll(t *testing.T) {
	tmp := t.TempDir()
	p := host.New(host.Options{Env: baseEnv(), TempDir: tmp})
	for range 3 {
		_, err := p.Acquire(context.Background(), sandbox.Spec{})
		require.NoError(t, err)
	}
	assert.Len(t, p.Live(), 3)
	require.NoError(t, p.ReleaseAll(context.Background()))
	assert.Empty(t, p.Live())
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "every lease directory is gone")
}
