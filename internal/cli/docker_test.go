package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

func requireDocker(t *testing.T) {
	t.Helper()
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
}

func TestGCAndImageUnreachableEngine(t *testing.T) {
	env := map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "none.sock")}
	r := execute(t, "", env, "gc", "--dry-run")
	assert.Equal(t, int(ExitSandbox), r.code, r.stderr)
	assert.Contains(t, r.stderr, "dockerd")

	r = execute(t, "", nil, "image", "build", "--dir", t.TempDir())
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "no Dockerfile")
}

func TestGCDryRun(t *testing.T) {
	requireDocker(t)
	r := execute(t, "", nil, "gc", "--dry-run")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.NotEmpty(t, r.stdout)
}

func TestImageBuild(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN echo built > /outpost-built\n"), 0o644))
	tag := "outpost/clitest:dev"
	r := execute(t, "", nil, "image", "build", "--dir", dir, "--tag", tag)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, tag)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.ImageInspect(context.Background(), tag)
	require.NoError(t, err)
	_, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})

	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN exit 3\n"), 0o644))
	r = execute(t, "", nil, "image", "build", "--dir", dir, "--tag", tag)
	assert.Equal(t, int(ExitSandbox), r.code, r.stderr)
}

func TestDoctor(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	testenv.CLI(t, "claude") // the registry is reachable where the CLIs could be installed
	r := execute(t, "", map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}, "doctor", "--download")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{"docker engine", "image outpost/base:dev", "claude protocol fixtures", "claude CLI flags",
		"codex CLI flags", "copilot protocol fixtures", "copilot CLI flags", "fake protocol fixtures"} {
		assert.Contains(t, r.stdout, "pass  "+want)
	}
	assert.NotContains(t, r.stdout, "FAIL")

	r = execute(t, "", map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "none.sock")}, "doctor")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stdout, "FAIL  docker engine")
}

// TestRunDriverDocker: a spec-defined driver runs in the default Docker
// sandbox exactly as on the host; the image provides its binary (sh) and
// the workspace its script.
func TestRunDriverDocker(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	ws := t.TempDir()
	// The lease user (not root) must be able to write the workspace, or
	// the turn fails as configuration before the CLI starts.
	require.NoError(t, os.Chmod(ws, 0o777))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "lines.json"), []byte(`{"id":"lines","binary":"sh",
		"args":["lines.sh"],"stdin":"${input.prompt}","requires_final":true,"env":{"LINES_KEY":"${secrets.LINES_KEY}"},"secrets":["LINES_KEY"],
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}},
		{"match":{"t":"end"},"event":"final","fields":{"text":"v"}}]},
		"failures":{"exit_codes":{"4":"unavailable"}}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "lines.sh"), []byte(`p=$(cat)
[ "$p" = down ] && exit 4
echo '{"t":"id","v":"c-1"}'
echo '{"t":"end","v":"in '$(hostname)' as '$(id -u)': '$p' key='${#LINES_KEY}'"}'
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("LINES_KEY=MARK-dk-secret\n"), 0o600))
	t.Chdir(ws)
	r := execute(t, "", nil, "run", "--agent", "lines", "--no-store", "--workspace", ws, "--json", "hello")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"conversation":"c-1"`)
	assert.Regexp(t, `"text":"in [0-9a-f]{12} as [1-9][0-9]*: hello key=14"`, r.stdout, "ran in a container, not as root, with the secret set")
	assert.NotContains(t, r.stdout+r.stderr, "MARK-dk-secret")
	r = execute(t, "", nil, "run", "--agent", "lines", "--no-store", "--workspace", ws, "down")
	assert.Equal(t, int(ExitUnavailable), r.code, r.stdout+r.stderr)
}

// bombDriver writes a project whose "bomb" driver forks without bound:
// every process starts two more and waits for them.
func bombDriver(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777)) // a root host's leases run as uid 1000
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "bomb.json"), []byte(`{"id":"bomb","binary":"sh",
		"args":["bomb.sh"],"requires_final":true,
		"output":{"mode":"jsonl","rules":[{"match":{"t":"id"},"event":"conversation","fields":{"id":"v"}},
		{"match":{"t":"end"},"event":"final","fields":{"text":"v"}}]}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "bomb.sh"), []byte(`echo '{"t":"id","v":"bomb-1"}'
b() { b & b & wait; }
b 2>/dev/null
`), 0o644))
	return ws
}

// outpostExecTasks bounds the tasks one exec of Outpost's own adds to a
// lease while it starts: the runtime's init process with its threads and
// the shell it becomes (seen: 6).
const outpostExecTasks = 16

// TestForkBombHitsPidsLimit: an agent that forks without bound in a lease
// with the default limits stops at the pids limit; the host can still start
// processes meanwhile, the turn is a process failure that names the limit
// (whether the bomb collapses and its shell exits 0, or it churns on until
// the deadline) and the lease is removed.
func TestForkBombHitsPidsLimit(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	ws := bombDriver(t)
	t.Chdir(ws)
	mine := filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(os.Getpid())),
		filters.Arg("label", docker.LabelManaged+"=true"))

	var peak, limit uint64
	var hostForked bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			list, err := cli.ContainerList(context.Background(), container.ListOptions{Filters: mine})
			if err != nil || len(list) == 0 {
				continue
			}
			st, err := cli.ContainerStatsOneShot(context.Background(), list[0].ID)
			if err != nil {
				continue
			}
			var s container.StatsResponse
			err = json.NewDecoder(st.Body).Decode(&s)
			st.Body.Close()
			if err != nil {
				continue
			}
			// A sample taken while the container goes away reads zeros.
			peak, limit = max(peak, s.PidsStats.Current), max(limit, s.PidsStats.Limit)
			if limit > 0 && s.PidsStats.Current+outpostExecTasks >= limit && !hostForked {
				// The lease is at (or a sample's width from) its limit:
				// the host still starts processes.
				hostForked = exec.Command("true").Run() == nil
			}
		}
	}()
	r := execute(t, "", nil, "run", "--agent", "bomb", "--no-store", "--workspace", ws, "--timeout", "15s", "--json", "go")
	close(stop)
	<-watched
	t.Logf("lease pids peak %d of limit %d; outpost exit %d: %s", peak, limit, r.code, r.stdout)
	assert.Equal(t, int(ExitProcess), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"class":"process"`)
	assert.Contains(t, r.stdout, `"limit":"pids"`)
	assert.Contains(t, r.stdout, "limit on processes was reached")
	assert.Equal(t, uint64(docker.DefaultPids), limit, "the default pids limit applies")
	// That the bomb reached the limit is the kernel's own count of refused
	// forks, which "limit":"pids" above reports; the samples (a collapsing
	// bomb can peak between two of them) show how close they came and that
	// nothing went past it. A command Outpost itself runs in the lease
	// meanwhile (the signal that stops the turn, the reading of the limit's
	// counter) is moved into its cgroup by the runtime, and the kernel
	// applies the limit to forks, not to such moves: one such exec (the
	// runtime's init and its threads, then a shell) can show on top.
	assert.GreaterOrEqual(t, peak+outpostExecTasks, limit, "the samples saw the lease at its limit")
	assert.LessOrEqual(t, peak, limit+outpostExecTasks, "and no further than Outpost's own exec adds")
	assert.True(t, hostForked, "the host started a process while the lease was at its limit")
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: mine})
	require.NoError(t, err)
	assert.Empty(t, list, "the lease is removed")
}

// TestRemovedContainerIsSandbox: a container removed while its turn runs
// (docker rm -f from outside, once the driver has started and named its
// conversation) ends the turn as a sandbox failure (exit 7) that names the
// removal — not the agent's process failure, nor a bootstrap one.
func TestRemovedContainerIsSandbox(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	ws := hangProject(t)
	cmd, stdout, stderr := startOutpost(t, ws, t.TempDir(), "run", "--agent", "hang", "--no-store", "--workspace", ws, "--json", "go")
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `"conversation"`) },
		60*time.Second, 50*time.Millisecond, "the turn started: %s", stderr)
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(cmd.Process.Pid)))})
	require.NoError(t, err)
	require.Len(t, list, 1)
	out, err := exec.Command("docker", "rm", "-f", list[0].ID).CombinedOutput()
	require.NoError(t, err, string(out))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr)
	assert.Equal(t, int(ExitSandbox), exit.ExitCode(), "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stdout.String(), `"class":"sandbox"`)
	assert.Contains(t, stdout.String(), "the sandbox disappeared during the turn: container "+list[0].ID[:12]+" was removed")
}
