package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
)

// mkCopy makes a workspace copy directory in tmp as copyProvider does,
// owned by o, with a file in the copy.
func mkCopy(t *testing.T, tmp string, o procowner.Owner) string {
	t.Helper()
	dir, err := os.MkdirTemp(tmp, CopyPrefix)
	require.NoError(t, err)
	require.NoError(t, procowner.WriteRecord(dir, procowner.Record{Owner: o}))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, copyWorkspace, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, copyWorkspace, "src", "f"), []byte("MARK-copy"), 0o644))
	return dir
}

// TestReapCopies: the copy of a dead runner goes, a live runner's stays,
// and so do a directory of the prefix without an owner record and a link.
func TestReapCopies(t *testing.T) {
	tmp := t.TempDir()
	host, _ := os.Hostname()
	dead := mkCopy(t, tmp, procowner.Owner{PID: 4242, Host: host})
	live := mkCopy(t, tmp, procowner.Self())
	unmarked := filepath.Join(tmp, CopyPrefix+"unmarked")
	require.NoError(t, os.MkdirAll(filepath.Join(unmarked, copyWorkspace), 0o755))
	outside := t.TempDir()
	require.NoError(t, procowner.WriteRecord(outside, procowner.Record{Owner: procowner.Owner{PID: 4242, Host: host}}))
	require.NoError(t, os.Symlink(outside, filepath.Join(tmp, CopyPrefix+"link")))
	alive := func(pid int, start string) bool { return pid != 4242 && procowner.Alive(pid, start) }

	got, err := ReapCopies(context.Background(), tmp, ReapOptions{DryRun: true, Alive: alive})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, CopyLeftover{Path: dead, Reason: "owner process 4242 is gone"}, got[0])
	assert.DirExists(t, dead)

	got, err = ReapCopies(context.Background(), tmp, ReapOptions{Alive: alive})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, got[0].Removed)
	assert.NoDirExists(t, dead)
	assert.FileExists(t, filepath.Join(live, copyWorkspace, "src", "f"), "a live runner's copy stays")
	assert.DirExists(t, unmarked, "not marked as a copy of a run")
	assert.FileExists(t, filepath.Join(outside, procowner.RecordFile), "a link is never followed")
}

// released is a lease whose container is gone.
type released struct{ sandbox.Sandbox }

func (released) Release(context.Context) error { return nil }

// TestCopyKeptOnceWriteBackBegins: from the write-back on, a copy holds
// changes its workspace may lack: a write-back that fails (or is cut
// short) leaves a copy that ReapCopies reports as kept, after its runner
// is gone too, and never removes.
func TestCopyKeptOnceWriteBackBegins(t *testing.T) {
	tmp := t.TempDir()
	dir := mkCopy(t, tmp, procowner.Self())
	l := &copiedLease{Sandbox: released{}, workspace: filepath.Join(tmp, "gone"), dir: dir,
		copy: filepath.Join(dir, copyWorkspace), rec: procowner.Record{Owner: procowner.Self()}, uid: -1, gid: -1}
	err := l.Release(context.Background())
	require.Error(t, err, "the workspace is gone: the write-back fails")
	assert.Contains(t, err.Error(), l.copy)

	dead := func(int, string) bool { return false }
	got, err := ReapCopies(context.Background(), tmp, ReapOptions{Alive: dead})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, got[0].Kept)
	assert.False(t, got[0].Removed)
	assert.Contains(t, got[0].Reason, "write-back into "+l.workspace+" did not finish")
	assert.FileExists(t, filepath.Join(dir, copyWorkspace, "src", "f"))
}

// TestOpenReapsDeadCopies: opening the docker kind as root removes the
// copies of dead runners of this host (a kill -9 left them), and leaves a
// live runner's.
func TestOpenReapsDeadCopies(t *testing.T) {
	testenv.Short(t)
	if os.Geteuid() != 0 {
		t.Skip("copies are made (and reaped on open) by outpost running as root")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	host, _ := os.Hostname()
	dead := mkCopy(t, tmp, procowner.Owner{PID: deadPID(t), Host: host})
	live := mkCopy(t, tmp, procowner.Self())
	e, err := openDocker(context.Background(), sandbox.Config{Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine: "+err.Error())
	}
	e.Close()
	assert.NoDirExists(t, dead)
	assert.DirExists(t, live)
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}
