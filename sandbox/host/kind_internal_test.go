package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// TestHostRefusesLimitsByFlag: the host sandbox refuses each limit it
// cannot apply with a configuration error naming the kind and exactly the
// flags given; asking for no limit is what it does anyway.
func TestHostRefusesLimitsByFlag(t *testing.T) {
	for _, c := range []struct {
		o    sandbox.Common
		want string
	}{
		{sandbox.Common{CPUs: 1}, "the host sandbox cannot apply --cpus: "},
		{sandbox.Common{Memory: 1 << 30}, "the host sandbox cannot apply --memory: "},
		{sandbox.Common{Pids: 100}, "the host sandbox cannot apply --pids-limit: "},
		{sandbox.Common{CPUs: 1, Memory: 1 << 30, Pids: 100}, "the host sandbox cannot apply --cpus, --memory, --pids-limit: "},
		{sandbox.Common{CPUs: sandbox.NoLimit, Memory: 1 << 30}, "the host sandbox cannot apply --memory: "},
	} {
		_, err := Kind().Open(context.Background(), sandbox.Config{Common: c.o})
		require.Error(t, err, "%+v", c.o)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		assert.ErrorContains(t, err, c.want)
	}
	e, err := Kind().Open(context.Background(), sandbox.Config{
		Common: sandbox.Common{CPUs: sandbox.NoLimit, Memory: sandbox.NoLimit, Pids: sandbox.NoLimit}})
	require.NoError(t, err, "no limit is what the host sandbox does")
	e.Close()
}

// TestHostEnvIsChosen: the host sandbox gives CLIs a few variables from
// Getenv, TZ=UTC, and nothing else of the environment.
func TestHostEnvIsChosen(t *testing.T) {
	env := map[string]string{"PATH": "/bin", "LANG": "C.UTF-8", "SECRET_TOKEN": "s3cret"}
	e, err := Kind().Open(context.Background(), sandbox.Config{Getenv: func(k string) string { return env[k] }})
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, map[string]string{"PATH": "/bin", "LANG": "C.UTF-8", "TZ": "UTC"}, e.(*engine).env)
}

// TestOpenReapsDeadRunsLeases: opening the host sandbox (what the next
// outpost command does) removes the lease directories of dead owners of
// this host, and leaves a live owner's and an unjudgeable one's.
func TestOpenReapsDeadRunsLeases(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // os.TempDir, where the kind's provider leases
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	me := procowner.Self()
	mk := func(name string, o procowner.Owner) string {
		dir := filepath.Join(tmp, LeasePrefix+name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "home"), 0o700))
		require.NoError(t, writeOwner(dir, o))
		return dir
	}
	gone := mk("dead", procowner.Owner{PID: dead.Process.Pid, Host: me.Host, Start: "1"})
	live := mk("live", me)
	foreign := mk("foreign", procowner.Owner{PID: 1, Host: "another-machine"})

	e, err := Kind().Open(context.Background(), sandbox.Config{})
	require.NoError(t, err)
	defer e.Close()
	assert.NoDirExists(t, gone)
	assert.DirExists(t, live)
	assert.DirExists(t, foreign)
}
