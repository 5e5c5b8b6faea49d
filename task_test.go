package outpost_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

func TestMain(m *testing.M) {
	if fakecli.IsChild() {
		fakecli.Main()
	}
	os.Exit(m.Run())
}

// fakeRunner is a runner on the host sandbox whose agent "fake" is the
// scriptable fake CLI.
func fakeRunner(t *testing.T, getenv func(string) string) *outpost.Runner {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	reg := agents.New()
	require.NoError(t, reg.Register(agents.Agent{Name: "fake", New: func() adapters.Adapter { return fakecli.New(exe) }}))
	r, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true, Agents: reg,
		Sandbox: outpost.SandboxOptions{Kind: "host"},
		Getenv: func(k string) string {
			if k == "PATH" {
				return os.Getenv("PATH") // the host sandbox's PATH
			}
			if getenv == nil {
				return ""
			}
			return getenv(k)
		}, TempDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// oneCommitRepo makes a repository with one commit of files.
func oneCommitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
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
	git("add", "-A")
	git("commit", "-qm", "task")
	return dir, git("rev-parse", "HEAD")
}

func TestSourceTurnsGetTheirOwnCopy(t *testing.T) {
	repo, commit := oneCommitRepo(t, map[string]string{"a.txt": "base\n"})
	r := fakeRunner(t, nil)
	ctx := context.Background()
	// Each attempt writes a.txt and reports its working directory.
	script := "ws-put a.txt changed\nenv PWD\n" + `emit {"type":"finished","ok":true}`
	recs, err := r.Batch(ctx, []batch.Job{{ID: "t", Agent: "fake", Prompt: script, Attempts: 3,
		Source: &source.Spec{Repo: repo, Commit: commit}, Metadata: []byte(`{"instance_id":"x__1"}`)}},
		outpost.BatchOptions{Options: batch.Options{Concurrency: 3}})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	dirs := map[string]bool{}
	for _, rec := range recs {
		dirs[rec.Outcome.Text] = true
		assert.Contains(t, rec.Outcome.Text, "PWD=/")
		require.True(t, rec.Outcome.OK, "%+v", rec.Outcome)
		require.NotNil(t, rec.Patch)
		assert.Equal(t, []string{"a.txt"}, rec.Patch.Files)
		assert.Equal(t, commit, rec.Patch.Base)
		assert.Positive(t, rec.Patch.Bytes)
		assert.JSONEq(t, `{"instance_id":"x__1"}`, string(rec.Metadata))
	}
	assert.Len(t, dirs, 3, "no two attempts share a workspace: %v", dirs)
	b, err := os.ReadFile(filepath.Join(repo, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "base\n", string(b), "the source repository is unchanged")
}

// TestSourceCopyCountsAgainstTheDeadline: a turn's deadline starts before
// its source is copied, so a fetch that never answers ends with the turn,
// a timeout, instead of holding it for the git timeout.
func TestSourceCopyCountsAgainstTheDeadline(t *testing.T) {
	asked, gone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		once.Do(func() {
			close(asked)
			<-req.Context().Done() // the fetch never gets an answer
			close(gone)
		})
	}))
	t.Cleanup(srv.Close)
	r := fakeRunner(t, nil)
	_, err := r.Run(context.Background(), outpost.Turn{Agent: "fake", Prompt: `emit {"type":"finished","ok":true}`,
		Source: &source.Spec{Repo: srv.URL + "/task.git", Commit: "main"}, Limits: harness.Limits{Deadline: 3 * time.Second}})
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
	assert.ErrorContains(t, err, "copy the source: over the turn's deadline")
	select {
	case <-asked:
	default:
		t.Log("on a loaded machine git had not reached the server by the deadline: only the timeout was checked")
		return
	}
	select {
	case <-gone: // the fetch was ended with the turn
	case <-time.After(time.Minute):
		t.Fatal("git's fetch outlived the turn that gave up on it")
	}
}

func TestTurnRefusals(t *testing.T) {
	r := fakeRunner(t, func(string) string { return "" })
	ctx := context.Background()
	_, err := r.Run(ctx, outpost.Turn{Agent: "fake", Prompt: "x", Image: "other:1"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "the host sandbox applies no image: %v", err)
	_, err = r.Run(ctx, outpost.Turn{Agent: "fake", Prompt: "x", Env: []string{"NOT_SET_ANYWHERE"}})
	assert.ErrorContains(t, err, "NOT_SET_ANYWHERE")
	_, err = r.Run(ctx, outpost.Turn{Agent: "fake", Prompt: "x", Env: []string{"DEPLOY_TOKEN=MARK-secret-value"}})
	assert.ErrorContains(t, err, "DEPLOY_TOKEN=…")
	assert.NotContains(t, err.Error(), "MARK-secret-value", "a value given where a name belongs is not echoed")
	_, err = r.Run(ctx, outpost.Turn{Agent: "fake", Prompt: "x", Workspace: t.TempDir(), Source: &source.Spec{Dir: t.TempDir()}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	_, err = r.Batch(ctx, []batch.Job{{ID: "j", Agent: "fake", Prompt: "x", Env: []string{"NOT_SET_ANYWHERE"}}}, outpost.BatchOptions{Options: batch.Options{}})
	assert.ErrorContains(t, err, "job j", "checked before anything runs")

	assert.Equal(t, r.AccountFingerprint("claude"), r.AccountFingerprint("claude"))
	assert.NotEqual(t, r.AccountFingerprint("claude"), r.AccountFingerprint("codex"))
}

func TestTurnEnvAndLimits(t *testing.T) {
	r := fakeRunner(t, func(k string) string {
		if k == "JOB_VAR" {
			return "job-value"
		}
		return ""
	})
	res, err := r.Run(context.Background(), outpost.Turn{Agent: "fake", Env: []string{"JOB_VAR"},
		Prompt: "env JOB_VAR\n" + `emit {"type":"usage","id":"m","input":1,"output":1,"cost":1}` + "\nsleep 20s\n" + `emit {"type":"finished","ok":true}`,
		Limits: harnessLimits(0.5)})
	require.Error(t, err)
	assert.Equal(t, "cost", outposterr.BudgetReason(err), "the turn's cap reaches the harness")
	assert.Contains(t, res.Text, "JOB_VAR=job-value", "the job's variable reaches the CLI")
}

func harnessLimits(maxCost float64) harness.Limits { return harness.Limits{MaxCostUSD: maxCost} }
