package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
)

// scratchPrefix starts the name of a turn's scratch directory in the
// sandbox home.
const scratchPrefix = ".outpost-turn-"

// newScratch names a fresh scratch directory under home.
func newScratch(home string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return path.Join(home, scratchPrefix+hex.EncodeToString(b[:]))
}

// teardown removes what a turn materialized for its invocation. Close is
// idempotent (later calls return the first result) and bounded by its
// context; the harness calls it on success, failure and cancellation alike.
type teardown struct {
	sb   sandbox.Sandbox
	dir  string
	once sync.Once
	err  error
}

// Close removes the scratch directory.
func (td *teardown) Close(ctx context.Context) error {
	td.once.Do(func() { td.err = removeInSandbox(ctx, td.sb, td.dir) })
	return td.err
}

// materializeTurnFiles writes files into dir (0700, files 0600, owned by
// the lease user) and returns the teardown that removes dir. The teardown
// is returned even when writing failed, so a partial write is removed too.
func materializeTurnFiles(ctx context.Context, sb sandbox.Sandbox, dir string, files []adapters.TurnFile) (*teardown, error) {
	td := &teardown{sb: sb, dir: dir}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	base := path.Base(dir)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Name: base + "/", Mode: 0o700, Typeflag: tar.TypeDir, ModTime: now}); err != nil {
		return td, err
	}
	for _, f := range files {
		if f.Name == "" || f.Name != path.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return td, fmt.Errorf("turn file name %q must be a plain file name", f.Name)
		}
		if err := tw.WriteHeader(&tar.Header{Name: base + "/" + f.Name, Mode: 0o600, Size: int64(len(f.Data)),
			Typeflag: tar.TypeReg, ModTime: now}); err != nil {
			return td, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return td, err
		}
	}
	if err := tw.Close(); err != nil {
		return td, err
	}
	return td, sb.CopyIn(ctx, path.Dir(dir), &buf)
}

// removeInSandbox runs `rm -rf -- dir` in the sandbox, bounded by ctx.
func removeInSandbox(ctx context.Context, sb sandbox.Sandbox, dir string) error {
	if dir == "" || dir == "/" || !path.IsAbs(dir) {
		return fmt.Errorf("refusing to remove %q", dir)
	}
	_, _, st, err := execCapture(ctx, sb, sandbox.Command{Args: []string{"rm", "-rf", "--", dir}}, 0)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return errors.Join(errors.New("remove "+dir+": timed out"), ctx.Err())
		}
		return err
	}
	if !st.Success() {
		return fmt.Errorf("rm %s: %s", dir, st)
	}
	return nil
}
