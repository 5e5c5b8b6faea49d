package harness

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/source"
)

// verifyTask is a task whose app.sh prints 1 and whose hidden test wants
// 2, with patches made against it.
type verifyTask struct {
	repo, tests string
	snap, files *source.Snapshot
	prov        sandbox.Provider
}

func newVerifyTask(t *testing.T) *verifyTask {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	vt := &verifyTask{repo: t.TempDir(), tests: t.TempDir()}
	write := func(dir, name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	write(vt.repo, "app.sh", "echo 1\n")
	write(vt.repo, "tests/check.sh", "exit 0\n") // the agent's copy; the hidden one wins
	write(vt.repo, "tests/helper.sh", "echo helper\n")
	write(vt.tests, "tests/check.sh", "[ \"$(sh app.sh)\" = 2 ] || { echo \"want 2, got $(sh app.sh)\"; exit 1; }\nsh tests/helper.sh\n")
	vt.git(t, "init", "-q")
	vt.git(t, "add", "-A")
	vt.git(t, "commit", "-qm", "task")
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	vt.snap, err = p.Prepare(context.Background(), source.Spec{Repo: vt.repo, Commit: "HEAD"})
	require.NoError(t, err)
	vt.files, err = p.Prepare(context.Background(), source.Spec{Dir: vt.tests})
	require.NoError(t, err)
	vt.prov = host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}, TempDir: t.TempDir()})
	return vt
}

func (vt *verifyTask) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = vt.repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

// patch returns the patch of edit (a shell script run in the repository),
// leaving the repository as it was.
func (vt *verifyTask) patch(t *testing.T, edit string) []byte {
	t.Helper()
	cmd := exec.Command("sh", "-c", edit)
	cmd.Dir = vt.repo
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	vt.git(t, "add", "-A")
	d := vt.git(t, "diff", "--cached", "--binary")
	vt.git(t, "reset", "-q", "--hard")
	return []byte(d)
}

func (vt *verifyTask) verify(t *testing.T, patch []byte, command string, timeout time.Duration) *Verification {
	t.Helper()
	v := Verify(context.Background(), VerifyInput{Provider: vt.prov,
		Source: Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return vt.snap.Tar(ctx), nil }, Patch: patch},
		Verifier: Verifier{Command: command, Timeout: timeout,
			Files: func(ctx context.Context) (io.ReadCloser, error) { return vt.files.Tar(ctx), nil }}})
	require.NotNil(t, v)
	return v
}

func reward(v *Verification) any {
	if v.Reward == nil {
		return nil
	}
	return *v.Reward
}

func TestVerifyVerdicts(t *testing.T) {
	vt := newVerifyTask(t)
	const check = "sh tests/check.sh"
	fix := vt.patch(t, "echo 'echo 2' > app.sh")
	wrong := vt.patch(t, "echo 'echo 3' > app.sh")

	v := vt.verify(t, fix, check, 0)
	assert.Equal(t, VerdictPass, v.Verdict, "%+v", v)
	assert.Equal(t, 1.0, reward(v))
	require.NotNil(t, v.ExitCode)
	assert.Equal(t, 0, *v.ExitCode)
	assert.Contains(t, v.Output, "helper", "the source's own files stay beside the test files")

	v = vt.verify(t, wrong, check, 0)
	assert.Equal(t, VerdictFail, v.Verdict, "%+v", v)
	assert.Equal(t, 0.0, reward(v))
	assert.Equal(t, 1, *v.ExitCode)
	assert.Contains(t, v.Output, "want 2, got 3")

	v = vt.verify(t, nil, check, 0)
	assert.Equal(t, VerdictFail, v.Verdict, "no patch: the untouched source is graded")
	assert.Contains(t, v.Output, "got 1")

	v = vt.verify(t, []byte("diff --git a/nope.sh b/nope.sh\n--- a/nope.sh\n+++ b/nope.sh\n@@ -1 +1 @@\n-a\n+b\n"), check, 0)
	assert.Equal(t, VerdictFail, v.Verdict, "%+v", v)
	assert.Equal(t, 0.0, reward(v))
	assert.Nil(t, v.ExitCode, "the command did not run")
	assert.Contains(t, v.Error, "does not apply")

	v = vt.verify(t, fix, "echo 0.25 > \"$OUTPOST_REWARD_FILE\"; exit 1", 0)
	assert.Equal(t, VerdictFail, v.Verdict)
	assert.Equal(t, 0.25, reward(v), "the verifier's reward wins")

	v = vt.verify(t, fix, "echo lots > \"$OUTPOST_REWARD_FILE\"", 0)
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Nil(t, v.Reward)
	assert.Contains(t, v.Error, `holds "lots", not a number`)

	v = vt.verify(t, fix, "no-such-verifier-command", 0)
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Nil(t, v.Reward)
	assert.Contains(t, v.Error, "exit 127")

	v = vt.verify(t, fix, "echo started; sleep 600", time.Second)
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Nil(t, v.Reward)
	assert.Contains(t, v.Error, "over its timeout of 1s")
	assert.Contains(t, v.Output, "started")

	v = vt.verify(t, fix, "head -c 40000 /dev/zero | tr '\\0' x; echo END", 0)
	assert.Equal(t, VerdictPass, v.Verdict)
	assert.LessOrEqual(t, len(v.Output), DefaultVerifyOutput+len("…"))
	assert.True(t, strings.HasSuffix(v.Output, "END\n"), "the tail is kept")
}

// TestVerifyTamperingChangesNothing: only the patch crosses from the
// agent's lease, and the test files win over it: a patch that rewrites the
// test, replaces it with a link, or plants a reward file is graded on the
// real tests.
func TestVerifyTamperingChangesNothing(t *testing.T) {
	vt := newVerifyTask(t)
	const check = "sh tests/check.sh"
	for name, edit := range map[string]string{
		"rewrite":            "echo 'exit 0' > tests/check.sh",
		"link":               "echo 'exit 0' > pass.sh && rm tests/check.sh && ln -s ../pass.sh tests/check.sh",
		"dir link":           "mkdir -p fake && echo 'exit 0' > fake/check.sh && cp tests/helper.sh fake/ && rm -r tests && ln -s fake tests",
		"a dir in its place": "rm tests/check.sh && mkdir tests/check.sh && echo x > tests/check.sh/x",
		"reward":             "echo 1 > reward && mkdir -p .outpost-turn-x && echo 1 > .outpost-turn-x/reward && echo 'echo 1 > \"$OUTPOST_REWARD_FILE\"' >> tests/check.sh",
	} {
		t.Run(name, func(t *testing.T) {
			v := vt.verify(t, vt.patch(t, edit), check, 0)
			assert.Equal(t, VerdictFail, v.Verdict, "%+v", v)
			assert.Equal(t, 0.0, reward(v))
			assert.Contains(t, v.Output, "want 2, got 1")
		})
	}
	// The real fix with a tampered test still passes: the test files win.
	v := vt.verify(t, vt.patch(t, "echo 'echo 2' > app.sh && echo 'exit 1' > tests/check.sh"), check, 0)
	assert.Equal(t, VerdictPass, v.Verdict, "%+v", v)
}

type failingProvider struct{}

func (failingProvider) Name() string { return "failing" }
func (failingProvider) Acquire(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, io.ErrUnexpectedEOF
}

func TestVerifyLeaseFailureIsError(t *testing.T) {
	v := Verify(context.Background(), VerifyInput{Provider: failingProvider{},
		Source:   Seed{Tar: func(context.Context) (io.ReadCloser, error) { return nil, io.EOF }},
		Verifier: Verifier{Command: "true"}})
	assert.Equal(t, VerdictError, v.Verdict)
	assert.Nil(t, v.Reward)
	assert.Contains(t, v.Error, "acquire the verifier's sandbox")
}

// TestVerifyWithoutGitIsError: a verifier lease that cannot run git (not
// on its PATH) could not apply the patch: verdict error, not a fail the
// patch is blamed for.
func TestVerifyWithoutGitIsError(t *testing.T) {
	vt := newVerifyTask(t)
	fix := vt.patch(t, "echo 'echo 2' > app.sh")
	bin := t.TempDir()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sh, filepath.Join(bin, "sh")))
	vt.prov = host.New(host.Options{Env: map[string]string{"PATH": bin}, TempDir: t.TempDir()})
	v := vt.verify(t, fix, "sh tests/check.sh", 0)
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Nil(t, v.Reward)
	assert.Contains(t, v.Error, "apply the attempt's patch")
}
