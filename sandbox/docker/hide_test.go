package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestHiddenDirectories: a Spec.Hide directory of the workspace is an empty
// read-only directory inside the lease — its secrets unreadable, nothing
// can be planted there — while the rest of the workspace stays writable; a
// missing one is created so the lease cannot create it; a link is refused.
func TestHiddenDirectories(t *testing.T) {
	p := newProvider(t, docker.Options{})
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("SECRET=MARK-hidden-secret\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o777))

	sb := acquire(t, p, sandbox.Spec{Workspace: ws, Hide: []string{".outpost", "sub/.outpost"}})
	r := run(context.Background(), t, sb, sh(`ls -A /workspace/.outpost; cat /workspace/.outpost/.env 2>&1;
echo x > /workspace/.outpost/.env 2>/dev/null && echo PLANTED || echo refused;
mkdir /workspace/.outpost/conversations 2>/dev/null && echo PLANTED || echo refused;
ls -A /workspace/sub/.outpost; echo y > /workspace/sub/.outpost/.env 2>/dev/null && echo PLANTED || echo refused;
echo ok > /workspace/visible && echo wrote`))
	assert.NotContains(t, r.stdout, "MARK-hidden-secret")
	assert.NotContains(t, r.stdout, "PLANTED")
	assert.Contains(t, r.stdout, "wrote")
	b, err := os.ReadFile(filepath.Join(ws, ".outpost", ".env"))
	require.NoError(t, err)
	assert.Equal(t, "SECRET=MARK-hidden-secret\n", string(b), "the host's file is untouched")
	fi, err := os.Lstat(filepath.Join(ws, "sub", ".outpost"))
	require.NoError(t, err, "the missing hidden directory was created on the host")
	assert.True(t, fi.IsDir())
	entries, _ := os.ReadDir(filepath.Join(ws, "sub", ".outpost"))
	assert.Empty(t, entries)

	// A link in place of the hidden directory is refused before any container exists.
	link := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(ws, ".outpost"), filepath.Join(link, ".outpost")))
	_, err = p.Acquire(context.Background(), sandbox.Spec{Workspace: link, Hide: []string{".outpost"}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = p.Acquire(context.Background(), sandbox.Spec{Workspace: ws, Hide: []string{"../x"}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}
