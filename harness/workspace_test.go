package harness

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/source"
)

// taskRepo makes a one-commit repository and returns it and the commit.
func taskRepo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("keep\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gone.txt"), []byte("gone\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644))
	git("add", "-A")
	git("commit", "-qm", "task")
	return dir, git("rev-parse", "HEAD")
}

func seededTurn(t *testing.T, script string) (Turn, *source.Snapshot) {
	t.Helper()
	repo, _ := taskRepo(t)
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	snap, err := p.Prepare(context.Background(), source.Spec{Repo: repo, Commit: "HEAD"})
	require.NoError(t, err)
	turn := fakeTurn(t, script)
	turn.Seed = &Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return snap.Tar(ctx), nil }}
	turn.Patch = &PatchOptions{Base: snap.Commit}
	return turn, snap
}

func TestSeedAndPatch(t *testing.T) {
	turn, snap := seededTurn(t, `ws-put keep.txt changed
ws-put new.txt brand new
ws-del gone.txt
ws-put debug.log ignored
ws-put .outpost marker
emit {"type":"result","text":"done"}
emit {"type":"finished","ok":true}`)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "%+v", res)
	require.NotNil(t, res.Patch, "warnings %v", res.Warnings)
	assert.Equal(t, []string{"gone.txt", "keep.txt", "new.txt"}, res.Patch.Files)
	assert.Equal(t, len(res.Patch.Diff), res.Patch.Bytes)
	d := string(res.Patch.Diff)
	assert.Contains(t, d, "+changed")
	assert.Contains(t, d, "deleted file mode")
	assert.NotContains(t, d, "debug.log", "ignored files stay out")
	assert.NotContains(t, d, ".outpost")

	// It applies to a fresh checkout of the base commit.
	fresh := t.TempDir()
	out, err := exec.Command("cp", "-a", snap.Dir+"/.", fresh).CombinedOutput()
	require.NoError(t, err, string(out))
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir = fresh
	apply.Stdin = strings.NewReader(d)
	out, err = apply.CombinedOutput()
	require.NoError(t, err, string(out))

	// A later turn of the same job starts from the base plus this patch.
	turn2, _ := seededTurn(t, `emit {"type":"result","text":"again"}
emit {"type":"finished","ok":true}`)
	turn2.Seed.Tar = turn.Seed.Tar
	turn2.Patch = &PatchOptions{Base: snap.Commit}
	turn2.Seed.Patch = res.Patch.Diff
	res2, err := Run(context.Background(), turn2)
	require.NoError(t, err)
	require.NotNil(t, res2.Patch, "warnings %v", res2.Warnings)
	assert.Equal(t, res.Patch.Files, res2.Patch.Files)
	assert.Equal(t, d, string(res2.Patch.Diff))
}

func TestPatchEmptyAndOmitted(t *testing.T) {
	turn, _ := seededTurn(t, `emit {"type":"result","text":"nothing"}
emit {"type":"finished","ok":true}`)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	require.NotNil(t, res.Patch)
	assert.Empty(t, res.Patch.Files)
	assert.Zero(t, res.Patch.Bytes)

	turn, _ = seededTurn(t, `ws-put keep.txt `+strings.Repeat("x", 4096)+`
emit {"type":"finished","ok":true}`)
	turn.Patch.MaxBytes = 1024
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	require.NotNil(t, res.Patch)
	assert.True(t, res.Patch.Omitted)
	assert.Empty(t, res.Patch.Diff)
	assert.Equal(t, []string{"keep.txt"}, res.Patch.Files)
}

func TestPatchAfterFailure(t *testing.T) {
	turn, _ := seededTurn(t, `ws-put keep.txt half done
emit {"type":"failure","text":"boom"}
emit {"type":"finished","ok":false}
exit 1`)
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	require.NotNil(t, res.Patch, "a failed turn's changes are collected too")
	assert.Equal(t, []string{"keep.txt"}, res.Patch.Files)
}

func TestSeedNeedsAFreshLease(t *testing.T) {
	turn, _ := seededTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Spec.Workspace = t.TempDir()
	err := turn.Validate()
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration))

	turn, _ = seededTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Patch.Base = "--output=/etc/x"
	assert.True(t, outposterr.Is(turn.Validate(), outposterr.Configuration))
}

func TestSeedRefusesAnEscapingLink(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "out")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	snap, err := p.Prepare(context.Background(), source.Spec{Dir: dir})
	require.NoError(t, err)
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Seed = &Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return snap.Tar(ctx), nil }}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	// The class the turn reports, not merely one somewhere in the chain:
	// a refused source is the job's configuration, never an interruption.
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	assert.False(t, res.Exited, "the CLI never ran")
}

// TestSeedOfSpecialFilesIsConfiguration: a source holding a device file
// (a copy of /dev, say) is refused as configuration, not as an aborted turn.
func TestSeedOfSpecialFilesIsConfiguration(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	snap, err := p.Prepare(context.Background(), source.Spec{Dir: dir})
	require.NoError(t, err)
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Seed = &Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return snap.Tar(ctx), nil }}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	assert.Contains(t, err.Error(), "fifo is not a regular file")
	assert.False(t, res.Exited, "the CLI never ran")
}

// unwritable makes the workspace probe (which starts the CLI) fail as it
// does for a lease user who may not write a root-owned workspace (tests run
// as root, who may).
type unwritable struct{ sandbox.Sandbox }

func (u unwritable) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	if len(cmd.Args) > 3 && cmd.Args[3] == "outpost-probe" {
		cmd.Args = []string{"sh", "-c", `printf '\036outpost-probe\036user=1000:1000(agent)\036owner=0:0(root:root) mode 755\n' >&2; exit 3`}
	}
	return u.Sandbox.Exec(ctx, cmd)
}

type unwritableProvider struct{ sandbox.Provider }

func (p unwritableProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	return unwritable{sb}, nil
}

func TestUnwritableWorkspaceIsConfiguration(t *testing.T) {
	turn := fakeTurn(t, `ws-put x.txt y
emit {"type":"finished","ok":true}`)
	turn.Provider = unwritableProvider{turn.Provider}
	turn.Spec.Workspace = t.TempDir()
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	msg := err.Error()
	assert.Contains(t, msg, "0:0(root:root)", "the owner is named")
	assert.Contains(t, msg, "1000:1000", "the lease user is named")
	assert.Contains(t, msg, "--user")
	assert.NotContains(t, msg, "Spec.", "the message names flags, not library fields")
	assert.Contains(t, msg, "source")
	assert.Contains(t, msg, turn.Spec.Workspace)
	assert.False(t, res.Exited, "the CLI never ran")
	assert.False(t, res.OK())
}

func TestWritableWorkspaceRuns(t *testing.T) {
	ws := t.TempDir()
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Spec.Workspace = ws
	_, err := Run(context.Background(), turn)
	require.NoError(t, err)
	entries, err := os.ReadDir(ws)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe leaves nothing behind")
}

// countingExecs counts the commands a lease runs.
type countingExecs struct {
	sandbox.Sandbox
	n *atomic.Int64
}

func (c countingExecs) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	c.n.Add(1)
	return c.Sandbox.Exec(ctx, cmd)
}

// A plain turn costs its lease one command, the CLI's: the workspace
// probe runs in the same exec, before the CLI starts (an exec is several
// engine or API calls on every container kind).
func TestPlainTurnIsOneExec(t *testing.T) {
	n := new(atomic.Int64)
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Provider = wrappingProvider{turn.Provider, func(sb sandbox.Sandbox) sandbox.Sandbox { return countingExecs{sb, n} }}
	turn.Spec.Workspace = t.TempDir()
	_, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n.Load())
}

// TestPatchMasksSecrets: a secret the agent wrote into the workspace is
// masked in the patch, which still applies; the result says so.
func TestPatchMasksSecrets(t *testing.T) {
	turn, snap := seededTurn(t, `ws-put keep.txt key=MARK-patch-3e7a
ws-put new.txt nothing secret
emit {"type":"finished","ok":true}`)
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None}, Vars: map[string]string{"EVAL_TOKEN": "MARK-patch-3e7a"}}
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	require.NotNil(t, res.Patch, "warnings %v", res.Warnings)
	d := string(res.Patch.Diff)
	assert.NotContains(t, d, "MARK-patch")
	assert.Contains(t, d, "+key=[REDACTED*****]")
	assert.Contains(t, d, "+nothing secret")
	assert.True(t, res.SecretPrinted)
	assert.Contains(t, res.Warnings, "the workspace's changes hold a secret the lease holds; it is masked in the patch")
	assert.Equal(t, len(res.Patch.Diff), res.Patch.Bytes)

	fresh := t.TempDir()
	out, err := exec.Command("cp", "-a", snap.Dir+"/.", fresh).CombinedOutput()
	require.NoError(t, err, string(out))
	apply := exec.Command("git", "apply", "-")
	apply.Dir = fresh
	apply.Stdin = strings.NewReader(d)
	out, err = apply.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(filepath.Join(fresh, "keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, "key=[REDACTED*****]", string(b), "the masked patch applies")
}
