package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/harness"
	outpostcli "github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// evalTask is one task of testdata/tasks: a repository made from committed
// plain files (one commit) and a prompt.
type evalTask struct {
	Name, Dir, Commit, Prompt string
}

// gitCmd runs git with a private configuration.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=outpost-test", "GIT_AUTHOR_EMAIL=test@localhost", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=outpost-test", "GIT_COMMITTER_EMAIL=test@localhost", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// makeTasks copies testdata/tasks into root/tasks and makes each task's
// files a git repository with one commit.
func makeTasks(t *testing.T, root string) []evalTask {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, testenv.RequireToolsEnv, "git")
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "tasks"))
	require.NoError(t, err)
	var tasks []evalTask
	for _, e := range entries {
		src := filepath.Join("testdata", "tasks", e.Name())
		dst := filepath.Join(root, "tasks", e.Name())
		require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join(src, "repo"))))
		prompt, err := os.ReadFile(filepath.Join(src, "prompt.txt"))
		require.NoError(t, err)
		gitCmd(t, dst, "init", "-q", "-b", "main")
		gitCmd(t, dst, "add", "-A")
		gitCmd(t, dst, "commit", "-q", "-m", "task "+e.Name())
		tasks = append(tasks, evalTask{Name: e.Name(), Dir: dst, Commit: gitCmd(t, dst, "rev-parse", "HEAD"),
			Prompt: strings.TrimSpace(string(prompt))})
	}
	require.GreaterOrEqual(t, len(tasks), 5)
	return tasks
}

// repoState is what must not change in a source repository.
func repoState(t *testing.T, dir string) string {
	t.Helper()
	return gitCmd(t, dir, "rev-parse", "HEAD") + "\n" + gitCmd(t, dir, "status", "--porcelain", "--untracked-files=all") +
		"\n" + gitCmd(t, dir, "stash", "list")
}

// evalDocker gates on the engine and the three CLIs and returns a client.
func evalDocker(t *testing.T) *client.Client {
	t.Helper()
	testenv.Short(t)
	for _, c := range []string{"claude", "codex", "copilot"} {
		testenv.CLI(t, c)
	}
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
	return cli
}

// leaseView is what docker inspect showed of one lease during its turn.
type leaseView struct {
	Workspace        string
	NanoCPUs, Memory int64
	Pids             int64
}

// watchLeases inspects every container the process pid owns while it runs
// and returns what it saw, by container id.
func watchLeases(t *testing.T, cli *client.Client, pid int, stop <-chan struct{}) func() map[string]leaseView {
	var mu sync.Mutex
	seen := map[string]leaseView{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			list, err := cli.ContainerList(ctx, container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(pid)))})
			for _, c := range list {
				mu.Lock()
				_, ok := seen[c.ID]
				mu.Unlock()
				if ok || err != nil {
					continue
				}
				info, ierr := cli.ContainerInspect(ctx, c.ID)
				if ierr != nil {
					continue // already removed
				}
				v := leaseView{NanoCPUs: info.HostConfig.NanoCPUs, Memory: info.HostConfig.Memory}
				if info.HostConfig.PidsLimit != nil {
					v.Pids = *info.HostConfig.PidsLimit
				}
				for _, m := range info.Mounts {
					if m.Destination == docker.Root {
						v.Workspace = m.Source
					}
				}
				mu.Lock()
				seen[c.ID] = v
				mu.Unlock()
			}
			cancel()
		}
	}()
	return func() map[string]leaseView {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// evalJob is a job line as the test writes it.
type evalJob struct {
	ID       string          `json:"id"`
	Agent    string          `json:"agent"`
	Prompt   string          `json:"prompt"`
	Source   map[string]any  `json:"source"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Attempts int             `json:"attempts,omitempty"`
	CPUs     float64         `json:"cpus,omitempty"`
	Memory   string          `json:"memory,omitempty"`
	Pids     int64           `json:"pids,omitempty"`
	Timeout  string          `json:"timeout,omitempty"`
	Model    string          `json:"model,omitempty"`
}

func writeJobs(t *testing.T, path string, jobs []evalJob) {
	t.Helper()
	var b strings.Builder
	for _, j := range jobs {
		line, err := json.Marshal(j)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}

// TestEvalBatch is the evaluation workflow end to end: five task
// repositories, a batch with attempts: 2 across Claude Code, Codex and
// Copilot in Docker leases against the scripted server (the tool scenario
// writes each task's marker file), then predictions. Every attempt gets its
// own fresh copy (no two leases share a workspace, none is a source),
// every patch is non-empty and applies to a fresh checkout of its commit,
// the sources are unchanged, metadata round-trips, each job's resources
// reach its lease, and the predictions file is valid JSONL.
func TestEvalBatch(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	tasks := makeTasks(t, root)
	before := map[string]string{}
	agents := []string{"claude", "codex", "copilot"}
	var jobs []evalJob
	for i, task := range tasks {
		before[task.Name] = repoState(t, task.Dir)
		meta := fmt.Sprintf(`{"instance_id":"outpost__%s-%d","difficulty":{"level":%d,"tags":["tiny","tool"]}}`, task.Name, i, i)
		jobs = append(jobs, evalJob{ID: task.Name, Agent: agents[i%len(agents)], Prompt: task.Prompt,
			Source:   map[string]any{"repo": "tasks/" + task.Name, "commit": task.Commit}, // relative to the jobs file
			Metadata: json.RawMessage(meta), Attempts: 2, CPUs: 1.5, Memory: "768m", Pids: int64(300 + i), Timeout: "5m"})
	}
	jobsFile := filepath.Join(root, "jobs.jsonl")
	writeJobs(t, jobsFile, jobs)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	preds := filepath.Join(t.TempDir(), "preds.jsonl")

	cmd := exec.Command(outpost, "batch", jobsFile, "--results", results, "--offline", "--concurrency", "4",
		"--predictions", preds, "--no-store")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	stop := make(chan struct{})
	leases := watchLeases(t, cli, cmd.Process.Pid, stop)
	err := cmd.Wait()
	close(stop)
	require.NoError(t, err, stderr.String())
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no container left")

	recs := readRecords(t, results)
	require.Len(t, recs, 10, stderr.String())
	byTask := map[string][]batch.Record{}
	for _, r := range recs {
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		byTask[r.Task] = append(byTask[r.Task], r)
	}
	for i, task := range tasks {
		rs := byTask[task.Name]
		require.Len(t, rs, 2, task.Name)
		for _, r := range rs {
			want := jobs[i].Metadata
			assert.JSONEq(t, string(want), string(r.Metadata), "metadata round-trips")
			assert.Equal(t, agents[i%len(agents)], r.Agent)
			require.NotNil(t, r.Patch, r.Job)
			assert.Equal(t, task.Commit, r.Patch.Base)
			assert.Equal(t, []string{"outpost-MARK-" + task.Name + ".txt"}, r.Patch.Files)
			assert.Positive(t, r.Patch.Bytes)
			patch := filepath.Join(filepath.Dir(results), filepath.FromSlash(r.Patch.Path))
			b, err := os.ReadFile(patch)
			require.NoError(t, err)
			assert.Len(t, b, r.Patch.Bytes)
			assert.Contains(t, string(b), "+MARK-"+task.Name, "the marker the agent wrote")

			// A fresh checkout of the commit takes the patch cleanly.
			fresh := t.TempDir()
			gitCmd(t, fresh, "clone", "-q", "--no-checkout", task.Dir, ".")
			gitCmd(t, fresh, "checkout", "-q", "--detach", task.Commit)
			gitCmd(t, fresh, "apply", "--check", patch)
		}
		assert.ElementsMatch(t, []int{1, 2}, []int{rs[0].Trial, rs[1].Trial})
		assert.Equal(t, before[task.Name], repoState(t, task.Dir), "source %s unchanged", task.Name)
	}

	// Every lease had its own workspace, none of them a source, and its
	// job's resources.
	seen := leases()
	require.NotEmpty(t, seen)
	workspaces := map[string]string{}
	pids := map[int64]bool{}
	for id, v := range seen {
		require.NotEmpty(t, v.Workspace, id)
		if other, dup := workspaces[v.Workspace]; dup {
			t.Errorf("leases %s and %s share workspace %s", id, other, v.Workspace)
		}
		workspaces[v.Workspace] = id
		for _, task := range tasks {
			assert.NotEqual(t, task.Dir, v.Workspace, "a lease works on a copy, never on the source")
		}
		assert.Equal(t, int64(1.5e9), v.NanoCPUs, "cpus reach the lease")
		assert.Equal(t, int64(768<<20), v.Memory, "memory reaches the lease")
		pids[v.Pids] = true
	}
	for i := range tasks {
		assert.True(t, pids[int64(300+i)], "task %d's pids limit reached a lease (seen %v)", i, pids)
	}

	// Predictions: valid JSONL, the three fields, one per instance.
	fh, err := os.Open(preds)
	require.NoError(t, err)
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		var p map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &p), sc.Text())
		assert.Len(t, p, 3, "instance_id, model_name_or_path, model_patch")
		id, _ := p["instance_id"].(string)
		assert.True(t, strings.HasPrefix(id, "outpost__task"), id)
		assert.NotEmpty(t, p["model_name_or_path"])
		patch, _ := p["model_patch"].(string)
		assert.True(t, strings.HasPrefix(patch, "diff --git a/outpost-MARK-task"), patch)
		n++
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, 5, n)
	all, err := os.ReadFile(strings.TrimSuffix(preds, ".jsonl") + ".all.jsonl")
	require.NoError(t, err)
	assert.Equal(t, 10, strings.Count(string(all), `"instance_id":"outpost__task`), "every attempt's prediction beside")
}

// TestEvalRootOwnedWorkspace: outpost as root (a CI runner) on a git
// checkout of root's runs a real turn in a Docker lease: the lease user
// works on a copy and the agent's file comes back into the checkout, whose
// entries keep their ownership (the new file is root's too) and where git
// works for root afterwards; the same directory as a job's source runs on
// a copy Outpost owns and stays untouched.
func TestEvalRootOwnedWorkspace(t *testing.T) {
	cli := evalDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a root-owned workspace")
	}
	outpost := buildOutpost(t)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README"), []byte("root's\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "private"), []byte("root only\n"), 0o600))
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@127.0.0.1", "commit", "-q", "-m", "root's"}} {
		git := exec.Command("git", args...)
		git.Dir = ws
		b, err := git.CombinedOutput()
		require.NoError(t, err, string(b))
	}
	owners := func() map[string][2]uint32 {
		m := map[string][2]uint32{}
		require.NoError(t, filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			m[p] = [2]uint32{st.Uid, st.Gid}
			return nil
		}))
		return m
	}
	before := owners()
	for p, o := range before {
		require.Equal(t, [2]uint32{0, 0}, o, p)
	}

	cmd := exec.Command(outpost, "run", "--agent", "claude", "--offline", "--no-store", "--workspace", ws, "--json",
		"MARK-root "+"[[outpost:scenario=tool]]")
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s\n%s", out, stderr.String())
	assert.Contains(t, string(out), `"ok":true`)
	assert.Contains(t, string(out), "wrote outpost-MARK-root.txt")
	assert.Zero(t, owned(t, cli, cmd.Process.Pid))

	after := owners()
	for p, o := range before {
		assert.Equal(t, o, after[p], "%s keeps its owner", p)
	}
	made := filepath.Join(ws, "outpost-MARK-root.txt")
	require.Contains(t, after, made, "the agent's file is in the checkout")
	assert.Equal(t, [2]uint32{0, 0}, after[made], "and is root's")
	for p, o := range after {
		assert.Equal(t, [2]uint32{0, 0}, o, "%s is root's", p)
	}
	git := exec.Command("git", "status", "--porcelain")
	git.Dir = ws
	st, err := git.CombinedOutput()
	require.NoError(t, err, "git status as root: %s", st)
	assert.Equal(t, "?? outpost-MARK-root.txt\n", string(st))
	// The scripted model takes the first mark it reads, git's status in
	// Claude Code's context included.
	require.NoError(t, os.Remove(made))

	// As a source: a copy Outpost owns, written by the agent; the
	// directory itself is untouched.
	jobs := filepath.Join(t.TempDir(), "jobs.jsonl")
	writeJobs(t, jobs, []evalJob{{ID: "copy", Agent: "claude", Prompt: "MARK-rootcopy [[outpost:scenario=tool]]",
		Source: map[string]any{"dir": ws}}})
	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd = exec.Command(outpost, "batch", jobs, "--results", results, "--offline", "--no-store", "--allow-path", ws)
	cmd.Dir = t.TempDir()
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	recs := readRecords(t, results)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Outcome.OK, "%+v", recs[0].Outcome)
	assert.Contains(t, recs[0].Outcome.Text, "wrote outpost-MARK-rootcopy.txt")
	_, err = os.Stat(filepath.Join(ws, "outpost-MARK-rootcopy.txt"))
	assert.True(t, os.IsNotExist(err), "the source directory is unchanged")
}

// TestEvalCostCap: a Claude Code, a Codex and a Copilot job under a
// generous --max-cost-usd run to ok (every token class they report has a
// price, Claude Code's cache writes included) and their usage of record is
// the gateway's; under a tiny cap each is stopped where its requests go —
// the gateway refuses the request after the one that crossed the cap, the
// upstream never sees it — and fails as process with budget "cost" (Codex
// and Copilot report usage only at the end, so nothing else could stop
// them); the same with a tiny --max-tokens; one over --max-turns fails with
// budget "turns"; the batch exits 12 each time. A cost cap on a model
// without a price is refused before any lease is made.
func TestEvalCostCap(t *testing.T) {
	evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	tasks := makeTasks(t, root)
	jobs := filepath.Join(root, "jobs.jsonl")
	var three []evalJob
	for i, agent := range []string{"claude", "codex", "copilot"} {
		three = append(three, evalJob{ID: agent, Agent: agent, Prompt: tasks[i].Prompt,
			Source: map[string]any{"repo": tasks[i].Dir, "commit": tasks[i].Commit}})
	}
	writeJobs(t, jobs, three)
	batch := func(args ...string) (int, []batch.Record, string) {
		t.Helper()
		results := filepath.Join(t.TempDir(), "results.jsonl")
		cmd := exec.Command(outpost, append([]string{"batch", jobs, "--results", results, "--offline", "--no-store"}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err, string(out))
		}
		recs := readRecords(t, results)
		return code, recs, string(out)
	}

	code, recs, out := batch("--max-cost-usd", "5", "--max-batch-cost-usd", "20")
	assert.Equal(t, 0, code, out)
	require.Len(t, recs, len(three), out)
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		assert.True(t, r.Outcome.Usage.CostKnown, "%s: the gateway priced every response", r.Job)
		assert.Positive(t, r.Outcome.Usage.CostUSD, r.Job)
	}

	// One model response of any of them costs more than a hundredth of a
	// cent at list price: the second request is refused.
	for _, cap := range [][]string{{"--max-cost-usd", "0.0001"}, {"--max-tokens", "10"}} {
		code, recs, out = batch(cap...)
		assert.Equal(t, int(outpostcli.ExitBudget), code, out)
		require.Len(t, recs, len(three), out)
		for _, r := range recs {
			o := r.Outcome
			assert.False(t, o.OK, "%s %v", r.Job, cap)
			assert.Equal(t, "process", o.Class, "%s %v: %s", r.Job, cap, o.Error)
			want, spent := "cost", "the cost cap of $0.0001 is spent"
			if cap[0] == "--max-tokens" {
				want, spent = "tokens", "the token cap of 10 is spent"
			}
			assert.Equal(t, want, o.Budget, "%s %v: %s", r.Job, cap, o.Error)
			assert.Contains(t, o.Error, spent, "%s: stopped by its spend, not by a missing price", r.Job)
			assert.Equal(t, 1, r.Turns, "no further turn")
		}
	}

	// A model without a price cannot be capped in dollars: refused before
	// anything runs, with the way out.
	unpriced := three[1]
	unpriced.Model = "no-such-model-0"
	writeJobs(t, jobs, []evalJob{unpriced})
	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(outpost, "batch", jobs, "--results", results, "--offline", "--no-store", "--max-cost-usd", "1")
	cmd.Dir = t.TempDir()
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(b))
	assert.Equal(t, int(outpostcli.ExitConfiguration), exit.ExitCode(), string(b))
	assert.Contains(t, string(b), `model "no-such-model-0" has no price`)
	assert.Contains(t, string(b), "--max-tokens")
	assert.NoFileExists(t, results, "no job ran")
	writeJobs(t, jobs, three[:1])

	// --max-turns 1: Claude Code stops itself after the tool turn
	// (--max-turns) and the turn fails with budget "turns".
	results = filepath.Join(t.TempDir(), "results.jsonl")
	cmd = exec.Command(outpost, "batch", jobs, "--results", results, "--offline", "--no-store", "--max-turns", "1")
	cmd.Dir = t.TempDir()
	b, err = cmd.CombinedOutput()
	require.ErrorAs(t, err, &exit, string(b))
	assert.Equal(t, int(outpostcli.ExitBudget), exit.ExitCode(), string(b))
	recs = readRecords(t, results)
	require.Len(t, recs, 1)
	o := recs[0].Outcome
	assert.Equal(t, "process", o.Class)
	assert.Equal(t, "turns", o.Budget, "%+v", o)
	require.NotNil(t, recs[0].Patch, "what the agent did before the cap is kept")
	assert.Equal(t, []string{"outpost-MARK-" + tasks[0].Name + ".txt"}, recs[0].Patch.Files)
}

// TestEvalResumeRetry: a results file holding a quota failure — --resume
// exits non-zero and says one job failed; --retry-failed=quota reruns only
// that job (it parks through the quota this time) and the file is green.
func TestEvalResumeRetry(t *testing.T) {
	evalDocker(t)
	outpost := buildOutpost(t)
	dir := t.TempDir()
	ws := workspace(t)
	jobs := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte(
		`{"id":"fine","agent":"claude","prompt":"MARK-fine","workspace":"`+ws+`"}`+"\n"+
			`{"id":"limited","agent":"claude","prompt":"MARK-limited [[outpost:scenario=quota;times=1]]","workspace":"`+ws+`"}`+"\n"), 0o600))
	results := filepath.Join(dir, "results.jsonl")
	store := filepath.Join(dir, "store")
	run := func(args ...string) (int, string) {
		// A store: the parked job resumes its conversation in a new lease.
		cmd := exec.Command(outpost, append([]string{"batch", jobs, "--results", results, "--offline", "--store", store,
			"--allow-path", ws}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err == nil {
			return 0, string(out)
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, string(out))
		return exit.ExitCode(), string(out)
	}
	// No parking: the quota failure is the job's result.
	code, out := run("--max-parks", "0")
	assert.Equal(t, int(outpostcli.ExitQuota), code, out)
	code, out = run("--resume")
	assert.Equal(t, int(outpostcli.ExitQuota), code, out)
	assert.Contains(t, out, "2 of 2 jobs already have a result (1 failed); running 0")
	assert.Contains(t, out, "1 of 2 jobs failed")

	code, out = run("--retry-failed=quota", "--stub-quota-reset", "3s", "--max-park", "30s")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "rerunning 1 failed")
	recs := readRecords(t, results)
	count := map[string]int{}
	for _, r := range recs {
		count[r.Job]++
		if r.Job == "limited" && r.Attempt == 2 {
			assert.True(t, r.Outcome.OK, "%+v", r.Outcome)
			assert.Equal(t, 1, r.Parks)
		}
	}
	assert.Equal(t, map[string]int{"fine": 1, "limited": 2}, count, "only the failed job ran again")
}

// TestEvalAccountPause: the scripted server answers the first model
// request of the batch with a quota whose reset is 20 s ahead; a batch of
// six Claude Code jobs at concurrency 3 starts no turn on claude after the
// batch saw the quota and before the reset (only turns already running go
// on), then all six succeed. Asserted from the server's request log and the
// result lines.
func TestEvalAccountPause(t *testing.T) {
	evalDocker(t)
	ws := workspace(t)
	store, err := conversation.NewFileStore(t.TempDir(), nil)
	require.NoError(t, err)
	ctx := context.Background()
	// Whichever job asks first gets the quota; every other answer is slow
	// (a few seconds), so the first wave is still running when it comes.
	r, err := outpost.New(ctx, outpost.Options{Project: ws, Offline: true, Store: store, Getenv: os.Getenv,
		OfflineServer: []outposttest.Option{outposttest.WithScenario(outposttest.ScenarioSlow),
			outposttest.WithSequence(outposttest.ScenarioQuota), outposttest.WithQuotaResetIn(20 * time.Second),
			outposttest.WithChunkDelay(300 * time.Millisecond)}})
	require.NoError(t, err)
	defer r.Close()
	var jobs []batch.Job
	for i := range 6 {
		id := fmt.Sprintf("j%d", i)
		jobs = append(jobs, batch.Job{ID: id, Agent: "claude", Prompt: "MARK-" + id})
	}
	var (
		mu      sync.Mutex
		pauseAt time.Time
		until   time.Time
	)
	recs, err := r.Batch(ctx, jobs, outpost.BatchOptions{Options: batch.Options{Concurrency: 3, MaxPark: time.Minute,
		OnPause: func(agent string, u time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if pauseAt.IsZero() {
				pauseAt, until = time.Now(), u
				assert.Equal(t, "claude", agent)
			}
		}}})
	require.NoError(t, err)
	require.Len(t, recs, 6)
	started := map[string]time.Time{}
	parks := 0
	for _, rec := range recs {
		assert.True(t, rec.Outcome.OK, "%s: %+v", rec.Job, rec.Outcome)
		started[rec.Job] = rec.Started
		parks += rec.Parks
	}
	assert.Equal(t, 1, parks, "one job met the quota, waited for the reset and resumed")
	mu.Lock()
	defer mu.Unlock()
	require.False(t, pauseAt.IsZero(), "the quota paused the account")

	// The server's view: when the quota was answered, and which job each
	// model request served.
	var quotaAt time.Time
	type req struct {
		at  time.Time
		job string
	}
	var reqs []req
	for _, rq := range r.OfflineServer().ModelRequests() {
		if rq.Auxiliary {
			continue
		}
		if rq.Scenario == outposttest.ScenarioQuota && quotaAt.IsZero() {
			quotaAt = rq.Time
		}
		job := ""
		for _, m := range rq.Messages {
			for _, c := range m.Content {
				if ms := outposttest.Markers(c.Text); m.Role == "user" && len(ms) > 0 && job == "" {
					job = strings.TrimPrefix(ms[0], "MARK-")
				}
			}
		}
		reqs = append(reqs, req{rq.Time, job})
	}
	t.Logf("quota answered %s, seen by the batch %s, reset %s", quotaAt.Format("15:04:05.000"),
		pauseAt.Format("15:04:05.000"), until.Format("15:04:05.000"))
	for _, rec := range recs {
		t.Logf("job %s started %s, %d ms, %d parks", rec.Job, rec.Started.Format("15:04:05.000"), rec.DurationMS, rec.Parks)
	}
	require.False(t, quotaAt.IsZero(), "the server answered a quota")
	assert.WithinDuration(t, quotaAt.Add(20*time.Second), until, 1500*time.Millisecond, "paused until the reset the server announced")
	require.True(t, pauseAt.Before(until), "the batch saw the quota before its reset")

	// No job started between the batch seeing the quota and the reset.
	held := 0
	for id, at := range started {
		if at.After(pauseAt) {
			assert.False(t, at.Before(until), "job %s started at %s, after the quota was seen (%s) and before the reset (%s)",
				id, at.Format("15:04:05.000"), pauseAt.Format("15:04:05.000"), until.Format("15:04:05.000"))
			held++
		}
	}
	assert.Positive(t, held, "some jobs waited for the reset (the test would prove nothing otherwise)")
	// Every model request between the quota and the reset came from a turn
	// already running when the batch saw the quota.
	for _, rq := range reqs {
		if rq.at.After(quotaAt) && rq.at.Before(until) {
			require.NotEmpty(t, rq.job, "a request without a job marker at %v", rq.at)
			assert.True(t, started[rq.job].Before(pauseAt), "job %s asked the model at %s, between the quota and the reset, in a turn started at %s",
				rq.job, rq.at.Format("15:04:05.000"), started[rq.job].Format("15:04:05.000"))
		}
	}
}

// TestEvalReadmeExample runs the README's worked evaluation example as a
// newcomer would paste it: task directories with hidden tests, a batch of
// two attempts each graded in its own lease (solved, pass@k), the run
// directory's report, predictions, and the predictions graded again.
func TestEvalReadmeExample(t *testing.T) {
	evalDocker(t)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	const head = "```bash\n# 1. Tasks: two task directories"
	s := string(readme)
	start := strings.Index(s, head)
	require.NotEqual(t, -1, start, "README has the worked example")
	start += len("```bash\n")
	end := strings.Index(s[start:], "```")
	require.NotEqual(t, -1, end)
	script := s[start : start+end]

	bin := buildOutpost(t)
	dir := t.TempDir()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "OUTPOST_STATE_DIR="+t.TempDir(),
		"GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	recs := readRecords(t, filepath.Join(dir, "outpost-eval", "results.jsonl"))
	require.Len(t, recs, 4, string(out))
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		require.NotNil(t, r.Patch)
		assert.Positive(t, r.Patch.Bytes)
	}
	assert.Contains(t, string(out), "+MARK-task1", "the patch was printed")
	for _, r := range recs {
		assert.Equal(t, harness.VerdictPass, r.Verdict, "%s: graded on its hidden test: %+v", r.Job, r.Verify)
	}
	assert.Contains(t, string(out), "solved 4 of 4 graded jobs (0 failed, 0 verifier errors); pass@1 1.000, pass@2 1.000 over 2 tasks")
	assert.Contains(t, string(out), `"pass_at_1": 1`, "the scores were printed")
	assert.Equal(t, 2, strings.Count(string(out), `"instance_id":"demo__task-`), "the predictions were printed, one per instance")
	assert.Contains(t, string(out), "task1#2", "the run directory's report lists the jobs")

	// outpost grade gives every attempt's prediction the batch's verdict.
	graded := readRecords(t, filepath.Join(dir, "outpost-eval", "graded", "results.jsonl"))
	require.Len(t, graded, 4, string(out))
	for _, r := range graded {
		assert.Equal(t, harness.VerdictPass, r.Verdict, "graded %s: %+v", r.Job, r.Verify)
	}
	assert.Equal(t, 3, strings.Count(string(out), "pass@1 1.000, pass@2 1.000 over 2 tasks"), "batch, report and grade: %s", out)
}
