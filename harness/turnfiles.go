package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials/install"
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
	staged := make([]install.PrivateFile, len(files))
	for i, f := range files {
		staged[i] = install.PrivateFile{Name: f.Name, Data: f.Data}
	}
	return &teardown{sb: sb, dir: dir}, install.WritePrivateDir(ctx, sb, dir, staged)
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
