package e2e

import (
	"context"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// leaseDeadline is the promise: a lease is gone within a minute of its
// runner's death, with nobody running outpost gc.
const leaseDeadline = 60 * time.Second

// awaitGone polls left until it reports nothing, failing the test when
// something is still there leaseDeadline after killed (plus the time one
// poll takes).
func awaitGone(t *testing.T, killed time.Time, left func() []string) time.Duration {
	t.Helper()
	for {
		l := left()
		if len(l) == 0 {
			return time.Since(killed)
		}
		require.Less(t, time.Since(killed), leaseDeadline, "left %v after the runner was killed", l)
		time.Sleep(500 * time.Millisecond)
	}
}

// TestDockerLeaseDiesWithRunner: outpost run is killed with SIGKILL while
// Claude Code waits on the scripted server in its container; the
// container is gone within a minute without outpost gc.
func TestDockerLeaseDiesWithRunner(t *testing.T) {
	testenv.Short(t)
	claudeBin := testenv.CLI(t, "claude")
	dockerEnv(t, claudeBin) // gates on the engine and the image
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	outpost := buildOutpost(t)

	ws := workspace(t)
	cmd := exec.Command(outpost, "run", "--agent", "claude", "--offline", "--scenario", "hang", "--workspace", ws, "--json", "MARK-kill9")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(claudeBin)+":"+os.Getenv("PATH"), "OUTPOST_STATE_DIR="+t.TempDir())
	cmd.Dir = t.TempDir()
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	owned := func() []string {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(pid)))})
		require.NoError(t, err)
		var out []string
		for _, c := range list {
			out = append(out, c.ID[:12]+" "+c.State)
		}
		return out
	}
	t.Cleanup(func() {
		for _, c := range owned() {
			_ = cli.ContainerRemove(context.Background(), strings.Fields(c)[0], container.RemoveOptions{Force: true})
		}
	})
	require.Eventually(t, func() bool { return len(owned()) == 1 && strings.Contains(stdout.String(), `"conversation"`) },
		60*time.Second, 100*time.Millisecond, "the turn started in a container")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed := time.Now()
	t.Logf("container gone %v after outpost run was killed", awaitGone(t, killed, owned).Round(100*time.Millisecond))
}

// TestKubernetesLeaseDiesWithRunner: outpost run --sandbox kubernetes is
// killed with SIGKILL while Claude Code waits on the scripted server in
// its pod; the pod, its Secret and the runner's Job are gone within a
// minute without outpost gc.
func TestKubernetesLeaseDiesWithRunner(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	claudeBin := testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	outpost := buildOutpost(t)

	ws := workspace(t)
	cmd := exec.Command(outpost, "run", "--agent", "claude", "--sandbox", "kubernetes", "--offline", "--scenario", "hang",
		"--workspace", ws, "--json", "MARK-kkill9")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(claudeBin)+":"+os.Getenv("PATH"), "OUTPOST_STATE_DIR="+t.TempDir(),
		"KUBECONFIG="+kc)
	cmd.Dir = t.TempDir()
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	sel := kubernetes.LabelOwnerPID + "=" + strconv.Itoa(pid)
	left := func() []string {
		out := kubeLeft(t, cs, pid)
		jobs, err := cs.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		require.NoError(t, err)
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				out = append(out, "job/"+j.Name)
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		l := strings.Join(left(), " ")
		return strings.Contains(stdout.String(), `"conversation"`) && strings.Contains(l, "pod/") && strings.Contains(l, "job/")
	}, 3*time.Minute, 200*time.Millisecond, "the turn started in a pod: %s", &stderr)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed := time.Now()
	t.Logf("pod, Secret and runner job gone %v after outpost run was killed", awaitGone(t, killed, left).Round(100*time.Millisecond))
}

// TestHostLeaseReapedByNextRun: outpost run --sandbox host is killed with
// SIGKILL mid-turn, which leaves its lease directory (the private home);
// the next outpost run on the host sandbox removes it.
func TestHostLeaseReapedByNextRun(t *testing.T) {
	testenv.Short(t)
	outpost := buildOutpost(t)
	ws := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", "drivers", "say.json"), []byte(`{"id":"say","binary":"sh",
		"args":["-c","echo $$ > say.pid; read -r p; case $p in hang*) exec sleep 600;; esac; echo answer: $p"],
		"stdin":"${input.prompt}","output":{"mode":"text"}}`), 0o644))
	tmp := t.TempDir()
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(outpost, append([]string{"run", "--agent", "say", "--sandbox", "host", "--no-store"}, args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "OUTPOST_STATE_DIR="+t.TempDir())
		return cmd
	}
	leases := func() []string {
		m, err := filepath.Glob(filepath.Join(tmp, host.LeasePrefix+"*"))
		require.NoError(t, err)
		return m
	}
	cmd := run("hang MARK-hkill")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// The driver a dead run left on the host: end its group.
		if b, err := os.ReadFile(filepath.Join(ws, "say.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(ws, "say.pid"))
		return err == nil && len(leases()) == 1
	}, time.Minute, 100*time.Millisecond, "the turn started")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	left := leases()
	require.Len(t, left, 1, "kill -9 leaves the lease directory")

	out, err := run("hello MARK-hnext").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "answer: hello MARK-hnext")
	assert.NoDirExists(t, left[0], "the next run removed the dead run's lease")
	assert.Empty(t, leases())
}

// TestDockerRootCopyReapedByGC: outpost run as root on a workspace of
// root's works on a copy in the temporary directory; killed with SIGKILL
// mid-turn (Claude Code waiting on the scripted server) it writes nothing
// back — the test stands in for the agent's work by changing the copy
// before the kill: a new file, an edited one — and leaves the copy, marked
// with its pid. The workspace is exactly as it was, not half-written;
// outpost gc lists the copy in a dry run and then removes it.
func TestDockerRootCopyReapedByGC(t *testing.T) {
	testenv.Short(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a root-owned workspace")
	}
	claudeBin := testenv.CLI(t, "claude")
	dockerEnv(t, claudeBin) // gates on the engine and the image
	outpost := buildOutpost(t)

	ws := t.TempDir() // root's
	require.NoError(t, os.Chmod(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README"), []byte("root's\n"), 0o644))
	tmp := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(claudeBin)+":"+os.Getenv("PATH"), "TMPDIR="+tmp)
	cmd := exec.Command(outpost, "run", "--agent", "claude", "--offline", "--scenario", "hang", "--no-store",
		"--workspace", ws, "--json", "MARK-rkill9")
	cmd.Env = append(env, "OUTPOST_STATE_DIR="+t.TempDir())
	cmd.Dir = t.TempDir()
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	copies := func() []string {
		m, err := filepath.Glob(filepath.Join(tmp, docker.CopyPrefix+"*"))
		require.NoError(t, err)
		return m
	}
	require.Eventually(t, func() bool { return len(copies()) == 1 && strings.Contains(stdout.String(), `"conversation"`) },
		60*time.Second, 100*time.Millisecond, "the turn started on a copy: %s", &stderr)
	left := copies()[0]
	copyWS := filepath.Join(left, "workspace")
	require.FileExists(t, filepath.Join(copyWS, "README"), "the copy holds the workspace")
	require.NoError(t, os.WriteFile(filepath.Join(copyWS, "outpost-MARK-rkill9.txt"), []byte("MARK-rkill9"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(copyWS, "README"), []byte("root's\nedited\n"), 0o644))

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Equal(t, []string{left}, copies(), "kill -9 leaves the copy")
	rec, err := os.ReadFile(filepath.Join(left, "owner.json"))
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"pid":`+strconv.Itoa(cmd.Process.Pid))
	assert.NotContains(t, string(rec), `"keep"`, "the write-back never began")

	entries, err := os.ReadDir(ws)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written back")
	b, err := os.ReadFile(filepath.Join(ws, "README"))
	require.NoError(t, err)
	assert.Equal(t, "root's\n", string(b), "the workspace is as it was")

	gc := func(args ...string) string {
		c := exec.Command(outpost, append([]string{"gc", "--sandbox", "docker"}, args...)...)
		c.Env, c.Dir = env, t.TempDir()
		out, err := c.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	out := gc("--dry-run")
	assert.Contains(t, out, "left over workspace copy "+left+" (owner process "+strconv.Itoa(cmd.Process.Pid)+" is gone)")
	assert.DirExists(t, left)
	out = gc()
	assert.Contains(t, out, "removed workspace copy "+left)
	assert.Empty(t, copies(), "no copy is left")
	entries, err = os.ReadDir(ws)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}
