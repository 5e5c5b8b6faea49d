package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// localPod runs the pod's sync scripts on this machine: Root is podRoot,
// the pod's /tmp is tmp. fail, when it returns true for a run, makes the
// archive's stream break after its first block (the manifest's header).
func localPod(t *testing.T, l *lease, podRoot, tmp string, fail func() bool) {
	t.Helper()
	for _, tool := range []string{"sh", "find", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	l.p.opts.OpTimeout = time.Minute
	l.syncRunner = func(ctx context.Context, script string, stdin io.Reader, apply func(io.Reader) error) error {
		s := strings.ReplaceAll(script, syncStamp, filepath.Join(tmp, ".outpost-sync"))
		s = strings.ReplaceAll(s, "-C /tmp ", "-C "+tmp+" ")
		s = strings.ReplaceAll(s, Root, podRoot)
		cmd := exec.CommandContext(ctx, "sh", "-c", s)
		cmd.Stdin = stdin
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var r io.Reader = out
		if fail != nil && fail() {
			r = io.MultiReader(io.LimitReader(out, 512), failingReader{})
		}
		applyErr := apply(r)
		if applyErr != nil {
			_ = cmd.Process.Kill()
		}
		_, _ = io.Copy(io.Discard, out)
		err = cmd.Wait()
		if applyErr != nil {
			return applyErr
		}
		if err != nil {
			return errors.New(err.Error() + ": " + stderr.String())
		}
		return nil
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("stream broken") }

// settle lets the coarse clock behind ctime move past the last stamp.
func settle() { time.Sleep(30 * time.Millisecond) }

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
	require.NoError(t, os.WriteFile(name, []byte(content), 0o644))
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestSyncRenamedDirectory: a directory renamed in the pod changes its own
// status, not its files'; they must still reach the host.
func TestSyncRenamedDirectory(t *testing.T) {
	for _, withLink := range []bool{false, true} {
		ws, pod, tmp := t.TempDir(), t.TempDir(), t.TempDir()
		writeFile(t, filepath.Join(ws, "a", "f"), "hi")
		writeFile(t, filepath.Join(ws, "a", "sub", "g"), "deep")
		require.NoError(t, os.CopyFS(pod, os.DirFS(ws)))
		writeFile(t, filepath.Join(tmp, ".outpost-sync.stamp"), "")
		l := testLease(t, ws)
		l.known = map[string]bool{"a": true, "a/f": true, "a/sub": true, "a/sub/g": true}
		localPod(t, l, pod, tmp, nil)
		settle()
		require.NoError(t, os.Rename(filepath.Join(pod, "a"), filepath.Join(pod, "b")))
		if withLink {
			require.NoError(t, os.Symlink("b", filepath.Join(pod, "a")))
		}

		require.NoError(t, l.syncWorkspace(context.Background()))
		assert.Equal(t, "hi", readFile(t, filepath.Join(ws, "b", "f")), "link=%v: a file of the renamed directory", withLink)
		assert.Equal(t, "deep", readFile(t, filepath.Join(ws, "b", "sub", "g")), "link=%v", withLink)
		if !withLink {
			_, err := os.Lstat(filepath.Join(ws, "a"))
			assert.ErrorIs(t, err, os.ErrNotExist)
		}
		assert.True(t, l.known["b/sub/g"], "link=%v: learned once fetched", withLink)
	}
}

// TestSyncFailedHalfwayResends: when the host could not apply a sync, the
// next one sends the same changes again; none is lost.
func TestSyncFailedHalfwayResends(t *testing.T) {
	ws, pod, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(ws, "x"), "old")
	require.NoError(t, os.CopyFS(pod, os.DirFS(ws)))
	writeFile(t, filepath.Join(tmp, ".outpost-sync.stamp"), "")
	l := testLease(t, ws)
	l.known = map[string]bool{"x": true}
	broken := true
	localPod(t, l, pod, tmp, func() bool { b := broken; broken = false; return b })
	settle()
	writeFile(t, filepath.Join(pod, "x"), "new")

	require.Error(t, l.syncWorkspace(context.Background()), "the stream broke")
	assert.Equal(t, "old", readFile(t, filepath.Join(ws, "x")))
	require.NoError(t, l.syncWorkspace(context.Background()))
	assert.Equal(t, "new", readFile(t, filepath.Join(ws, "x")), "the change is sent again after a failed sync")
}

// TestApplySyncRemovalDoesNotFollowLink: a directory the pod replaced by a
// link: the names the host knew beneath the directory are not removed
// through the link (they went with the directory), which would remove the
// files the link's target holds.
func TestApplySyncRemovalDoesNotFollowLink(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a", "f"), "old")
	l := testLease(t, ws)
	l.known = map[string]bool{"a": true, "a/f": true}
	require.NoError(t, l.applySync(syncArchive(t, []string{"./a", "./b", "./b/f"},
		tar.Header{Name: "./b/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "./b/f", Typeflag: tar.TypeReg, Mode: 0o644, Uname: "new"},
		tar.Header{Name: "./a", Typeflag: tar.TypeSymlink, Linkname: "b"})))
	assert.Equal(t, "new", readFile(t, filepath.Join(ws, "b", "f")), "b/f, which the pod has, was removed through the link a")
	target, err := os.Readlink(filepath.Join(ws, "a"))
	require.NoError(t, err)
	assert.Equal(t, "b", target)
}
