package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// TestRemoteEngineDelivery: an engine that cannot see this machine's
// files gets CLIs by copy and refuses the in-place workspace of outpost
// run with a configuration error that names the alternatives; a local
// engine mounts.
func TestRemoteEngineDelivery(t *testing.T) {
	host, flags := testenv.SSHEngine(t)
	ctx := context.Background()
	p, err := New(ctx, Options{Host: host, SSHFlags: flags, Version: "test"})
	require.NoError(t, err)
	e := &engine{ctx: ctx, p: p}
	defer e.Close()
	assert.Equal(t, sandbox.DeliverCopy, e.Delivery().Mode)
	_, _, err = e.Lease(nil, t.TempDir())
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.Contains(t, err.Error(), "not on this machine")
	assert.Contains(t, err.Error(), "--sandbox host")

	requireDocker(t)
	lp, err := New(ctx, Options{Version: "test"})
	require.NoError(t, err)
	local := &engine{ctx: ctx, p: lp}
	defer local.Close()
	assert.Equal(t, sandbox.DeliverMount, local.Delivery().Mode)
}

// TestRemoteEngineTaskLease: an engine that cannot see this machine's
// files (here the local one declared remote) leases with no workspace — a
// batch job's source or a verifier's files are copied in — mounting no CLI
// (it is copied in too) and routing to no gateway (it cannot reach this
// machine's socket); a workspace to mount is still refused.
func TestRemoteEngineTaskLease(t *testing.T) {
	testenv.Short(t)
	ctx := context.Background()
	requireDocker(t)
	p, err := New(ctx, Options{Remote: true, Version: "test"})
	require.NoError(t, err)
	e := &engine{ctx: ctx, p: p, c: sandbox.Config{Common: sandbox.Common{Network: "none"}}}
	defer e.Close()
	require.False(t, p.Local())
	assert.Equal(t, sandbox.DeliverCopy, e.Delivery().Mode)
	assert.Equal(t, sandbox.ViaNone, e.Gateway().Via, "the runner's gateway socket is not reachable from there")

	cli := &sandbox.CLI{Mount: sandbox.Mount{Source: t.TempDir(), Target: "/opt/cli", ReadOnly: true}, LeaseBinDir: "/opt/cli/bin"}
	_, _, err = e.Lease(cli, t.TempDir())
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "cannot mount the workspace")

	prov, spec, err := e.Lease(cli, "")
	require.NoError(t, err)
	assert.Empty(t, spec.Mounts, "the CLI is copied in, not mounted")
	assert.Equal(t, sandbox.BasePath, spec.Env["PATH"])
	sb, err := prov.Acquire(ctx, spec)
	require.NoError(t, err)
	defer func() { assert.NoError(t, sb.Release(context.Background())) }()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "task.txt", Mode: 0o644, Size: 5}))
	_, err = tw.Write([]byte("task\n"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, sb.CopyIn(ctx, Root, &tb))
	out := execOK(ctx, t, sb, "cat", "task.txt")
	assert.Equal(t, "task\n", out, "the copied-in file is in the workspace")
}

// TestRootOwnedWorkspaceOnACopy: outpost as root on a workspace of root's
// leases as DefaultUser on a copy that user can write; at release the
// lease's edits, new files and deletions are in the workspace, whose
// entries keep their owner and whose new file is root's; .outpost (hidden)
// is neither copied nor touched.
func TestRootOwnedWorkspaceOnACopy(t *testing.T) {
	testenv.Short(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a root-owned workspace")
	}
	ctx := context.Background()
	requireDocker(t)
	p, err := New(ctx, Options{Version: "test", Network: "none"})
	require.NoError(t, err)
	e := &engine{ctx: ctx, p: p, root: true}
	defer e.Close()

	ws := t.TempDir() // root's, 0700
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README"), []byte("root's\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "gone"), []byte("bye\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("SECRET=1\n"), 0o600))

	prov, spec, err := e.Lease(nil, ws)
	require.NoError(t, err)
	assert.Empty(t, spec.User, "the lease user stays the default, never root")
	spec.Hide = []string{".outpost"}
	sb, err := prov.Acquire(ctx, spec)
	require.NoError(t, err)
	// The copy is marked as this runner's: a sweep leaves it.
	dir := sb.(*copiedLease).dir
	assert.Equal(t, os.TempDir(), filepath.Dir(dir))
	assert.FileExists(t, filepath.Join(dir, procowner.RecordFile))
	left, err := ReapCopies(ctx, "", ReapOptions{DryRun: true})
	require.NoError(t, err)
	for _, l := range left {
		assert.NotEqual(t, dir, l.Path, "a live runner's copy is kept")
	}
	assert.DirExists(t, dir)
	out := execOK(ctx, t, sb, "sh", "-c", `id -u; echo more >> README && echo new > new.txt && rm gone && ls -A .outpost | wc -l`)
	assert.Equal(t, "1000\n0\n", out, "the default user, and nothing of .outpost")
	_, err = os.Stat(filepath.Join(ws, "new.txt"))
	assert.True(t, os.IsNotExist(err), "the lease works on a copy")

	require.NoError(t, sb.Release(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "README"))
	require.NoError(t, err)
	assert.Equal(t, "root's\nmore\n", string(b))
	b, err = os.ReadFile(filepath.Join(ws, "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(b))
	_, err = os.Stat(filepath.Join(ws, "gone"))
	assert.True(t, os.IsNotExist(err))
	b, err = os.ReadFile(filepath.Join(ws, ".outpost", ".env"))
	require.NoError(t, err)
	assert.Equal(t, "SECRET=1\n", string(b))
	require.NoError(t, filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "%s is root's", p)
		return nil
	}))
	assert.NoDirExists(t, sb.(*copiedLease).dir, "the copy is removed")
}

// execOK runs args in sb, requires its success and returns its output.
func execOK(ctx context.Context, t *testing.T, sb sandbox.Sandbox, args ...string) string {
	t.Helper()
	proc, err := sb.Exec(ctx, sandbox.Command{Args: args})
	require.NoError(t, err)
	defer func() { _ = proc.Close() }()
	out, err := io.ReadAll(proc.Stdout())
	require.NoError(t, err)
	st, err := proc.Wait()
	require.NoError(t, err)
	require.True(t, st.Success(), "%s %s", st, out)
	return string(out)
}

// requireDocker skips the test (or fails it, when Docker is required)
// unless the local Docker engine answers.
func requireDocker(t *testing.T) {
	t.Helper()
	c, err := NewClient("")
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine: "+err.Error())
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine: "+err.Error())
	}
}
