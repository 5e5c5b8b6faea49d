package procowner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweep: a dead owner's directory goes, a live owner's stays, one whose
// record says to keep it is reported and stays; without a record a
// directory is judged by age only when the sweep says so; links and other
// names are never touched; a dry run removes nothing.
func TestSweep(t *testing.T) {
	tmp := t.TempDir()
	now := time.Now()
	pol := Policy{Grace: time.Hour, Hostname: "here", Now: func() time.Time { return now },
		Alive: func(pid int, _ string) bool { return pid == 1 }}
	mk := func(name string, r *Record) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "w"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "w", "f"), []byte("MARK"), 0o600))
		if r != nil {
			require.NoError(t, WriteRecord(dir, *r))
		}
		return dir
	}
	dead := mk("x-dead", &Record{Owner: Owner{PID: 2, Host: "here"}})
	live := mk("x-live", &Record{Owner: Owner{PID: 1, Host: "here"}})
	kept := mk("x-kept", &Record{Owner: Owner{PID: 3, Host: "here"}, Keep: "MARK-why"})
	old := mk("x-old", nil)
	past := now.Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))
	other := mk("y-dead", &Record{Owner: Owner{PID: 2, Host: "here"}})
	outside := mk("outside", &Record{Owner: Owner{PID: 2, Host: "here"}})
	require.NoError(t, os.Symlink(outside, filepath.Join(tmp, "x-link")))
	// A record that is a link is no record.
	linked := mk("x-linkedrecord", nil)
	require.NoError(t, os.Symlink(filepath.Join(dead, RecordFile), filepath.Join(linked, RecordFile)))

	paths := func(fs []Found) map[string]Found {
		m := map[string]Found{}
		for _, f := range fs {
			m[f.Path] = f
		}
		return m
	}
	s := Sweep{Dir: tmp, Prefix: "x-", Policy: pol, DryRun: true}
	got, err := s.Run(context.Background())
	require.NoError(t, err)
	m := paths(got)
	assert.Len(t, m, 2)
	assert.Contains(t, m, dead)
	assert.Equal(t, "owner process 2 is gone", m[dead].Reason)
	assert.True(t, m[kept].Kept)
	assert.Contains(t, m[kept].Reason, "kept: MARK-why")
	assert.DirExists(t, dead, "a dry run removes nothing")

	s.DryRun = false
	got, err = s.Run(context.Background())
	require.NoError(t, err)
	m = paths(got)
	assert.Len(t, m, 2)
	assert.True(t, m[dead].Removed)
	assert.False(t, m[kept].Removed)
	assert.NoDirExists(t, dead)
	for _, d := range []string{live, kept, old, other, outside, linked} {
		assert.DirExists(t, d)
	}
	assert.FileExists(t, filepath.Join(outside, "w", "f"), "a link is never followed")

	s.Unrecorded = true
	got, err = s.Run(context.Background())
	require.NoError(t, err)
	m = paths(got)
	assert.Contains(t, m, old, "without a record, judged by age")
	assert.NotContains(t, m, linked, "younger than the grace")
	assert.NoDirExists(t, old)
	assert.DirExists(t, live)

	if os.Geteuid() == 0 {
		theirs := mk("x-theirs", &Record{Owner: Owner{PID: 2, Host: "here"}})
		require.NoError(t, os.Chown(theirs, 4242, 4242))
		got, err = s.Run(context.Background())
		require.NoError(t, err)
		assert.NotContains(t, paths(got), theirs, "another user's directory is never touched")
		assert.DirExists(t, theirs)
	}

	_, err = Sweep{Dir: filepath.Join(tmp, "missing"), Prefix: "x-", Policy: pol}.Run(context.Background())
	assert.Error(t, err)
}
