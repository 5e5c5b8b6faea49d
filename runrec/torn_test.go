package runrec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/runrec"
)

// TestJobDirectoryTornByACrash: a run that stopped between creating a job's
// directory and writing its job.json (the file is synced first, so the
// window is real) leaves an empty directory. Continuing the run still
// records the job there, and reading the directory is not an error.
func TestJobDirectoryTornByACrash(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(dir, runrec.Manifest{OutpostVersion: "first"})
	require.NoError(t, err)
	require.NoError(t, rec.Job("ok", 0).Finish(&harness.Result{Agent: "a"}))
	require.NoError(t, rec.Close())
	// What the crash left: the directory of job "torn", and the temporary
	// file of its job.json, never renamed.
	torn := filepath.Join(dir, runrec.JobsDir, "torn")
	require.NoError(t, os.Mkdir(torn, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(torn, ".job.json.tmp-123"), []byte(`{"id":"to`), 0o600))

	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err, "a torn job directory does not make the run unreadable")
	require.Len(t, run.Jobs, 1)
	assert.Equal(t, "ok", run.Jobs[0].ID)
	assert.Contains(t, strings.Join(run.Notes, "\n"), "torn")

	rec, err = runrec.Create(dir, runrec.Manifest{OutpostVersion: "second"})
	require.NoError(t, err)
	a := rec.Job("torn", 0)
	require.NoError(t, a.Finish(&harness.Result{Agent: "a"}), "the continued run records the job")
	assert.Equal(t, filepath.Join(torn, "1"), a.Dir())
	require.NoError(t, rec.Close())
	run, err = runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	require.Len(t, run.Jobs, 2)
	assert.Equal(t, "torn", run.Jobs[1].ID)
	require.Len(t, run.Jobs[1].Attempts, 1)
	assert.NotNil(t, run.Jobs[1].Attempts[0].Result)

	// A job directory with attempts but no job.json is not a torn creation:
	// still an error.
	require.NoError(t, os.Remove(filepath.Join(torn, runrec.JobFile)))
	_, err = runrec.Read(dir, runrec.ReadOptions{})
	assert.Error(t, err)
}
