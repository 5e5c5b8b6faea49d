package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// batchJobs writes n jobs alternating between agents: most succeed, some
// hit a quota that resets in seconds, some meet an outage that passes.
func batchJobs(t *testing.T, dir string, n int, agents []string) (path string, kinds map[string]string) {
	t.Helper()
	kinds = map[string]string{}
	var b strings.Builder
	for i := range n {
		id := fmt.Sprintf("job-%02d", i)
		agent := agents[i%len(agents)]
		prompt := fmt.Sprintf("task MARK-%s", id)
		kind := "ok"
		switch i % 5 {
		case 1:
			kind, prompt = "quota", prompt+" [[outpost:scenario=quota;times=1]]"
		case 3:
			kind, prompt = "outage", prompt+" [[outpost:scenario=unavailable;times=3]]"
		}
		kinds[id] = kind
		line, _ := json.Marshal(batch.Job{ID: id, Agent: agent, Prompt: prompt, Workspace: dir})
		b.Write(line)
		b.WriteByte('\n')
	}
	path = filepath.Join(t.TempDir(), "jobs.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path, kinds
}

func readRecords(t *testing.T, path string) []batch.Record {
	t.Helper()
	fh, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer fh.Close()
	var out []batch.Record
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r batch.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		out = append(out, r)
	}
	return out
}

// TestBatchAcrossAgents runs 40 jobs across Claude, Codex and Copilot in Docker against
// the scripted server: every job ends ok, parked quota jobs resume on their
// conversations, outages are retried, no container is left; a batch killed
// halfway and resumed redoes no finished job.
func TestBatchAcrossAgents(t *testing.T) {
	testenv.Short(t)
	testenv.CLI(t, "claude")
	testenv.CLI(t, "codex")
	testenv.CLI(t, "copilot")
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	if _, err := cli.Ping(context.Background()); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
	outpost := buildOutpost(t)
	agents := []string{"claude", "codex", "copilot"}
	ws := workspace(t)
	jobs, kinds := batchJobs(t, ws, 40, agents)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	args := []string{"batch", jobs, "--results", results, "--offline", "--stub-quota-reset", "4s",
		"--concurrency", "4", "--max-park", "20s", "--workspace", ws, "--store", filepath.Join(t.TempDir(), "store"),
		"--allow-path", ws} // the jobs name a workspace outside the jobs file's directory

	// First run: interrupted once some jobs have finished.
	cmd := exec.Command(outpost, args...)
	cmd.Dir = t.TempDir()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(readRecords(t, results)) >= 8 }, 3*time.Minute, 200*time.Millisecond, "some jobs finish")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	assert.Equal(t, 130, exit.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "--resume")
	first := readRecords(t, results)
	require.Less(t, len(first), 40, "interrupted before the end")
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "the interrupted batch left no container")

	// Second run: --resume finishes the rest without redoing any job.
	cmd = exec.Command(outpost, append(args, "--resume")...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no container left")
	all := readRecords(t, results)
	require.Len(t, all, 40, "each job recorded exactly once")
	seen := map[string]int{}
	for _, r := range all {
		seen[r.Job]++
		assert.True(t, r.Outcome.OK, "job %s: %+v", r.Job, r.Outcome)
		assert.NotEmpty(t, r.Conversation)
		switch kinds[r.Job] {
		case "quota":
			if r.Agent == "copilot" {
				// Copilot retries a 429 itself, and the one-shot quota has
				// passed by its retry: the turn succeeds without parking.
				break
			}
			assert.GreaterOrEqual(t, r.Parks, 1, "job %s was parked", r.Job)
			assert.Contains(t, r.Outcome.Text, "MARK-"+r.Job, "job %s resumed on its conversation, not restarted", r.Job)
		case "outage":
			assert.GreaterOrEqual(t, r.Turns, 1)
		}
	}
	for id, n := range seen {
		assert.Equal(t, 1, n, "job %s recorded once", id)
	}
}

// owned counts the containers an outpost process (pid) created; other
// tests running in parallel have their own.
func owned(t *testing.T, cli interface {
	ContainerList(context.Context, container.ListOptions) ([]container.Summary, error)
}, pid int) int {
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelManaged+"=true"), filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(pid)))})
	require.NoError(t, err)
	return len(list)
}
