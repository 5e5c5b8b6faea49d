package kubernetes_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// cgroupScript prints the lease container's memory limit, CPU quota and
// period, and its own pids limit, from the cgroup files it sees (v1, else
// v2), one per line.
const cgroupScript = `if [ -r /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us /sys/fs/cgroup/pids/pids.max
else
cat /sys/fs/cgroup/memory.max; read -r q per </sys/fs/cgroup/cpu.max; echo "$q"; echo "$per"; cat /sys/fs/cgroup/pids.max
fi`

// TestLimitsApplied: --cpus and --memory reach the pod spec and the
// container's cgroup; the node limits the pod's processes to the default
// pids limit (checked at acquisition, and in the pod's cgroup when the node
// is this machine); the root filesystem is read-only and the writable
// volumes are sized. A pids limit the node does not apply is refused.
func TestLimitsApplied(t *testing.T) {
	runID := "test-" + uuid.NewString()
	p := newProvider(t, kubernetes.Options{RunID: runID})
	sb := acquire(t, p, sandbox.Spec{CPUs: 0.5, MemoryBytes: 256 << 20})
	pod := getPod(t, clientset(t), p.Namespace(), sb.ID())
	require.NotNil(t, pod)

	c := pod.Spec.Containers[0]
	assert.Equal(t, "500m", c.Resources.Limits.Cpu().String())
	assert.Equal(t, int64(256<<20), c.Resources.Limits.Memory().Value())
	assert.Equal(t, kubernetes.DefaultTmpBytes+kubernetes.DefaultWorkspaceBytes+1<<30, c.Resources.Limits.StorageEphemeral().Value())
	require.NotNil(t, c.SecurityContext.ReadOnlyRootFilesystem)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	sizes := map[string]int64{}
	for _, v := range pod.Spec.Volumes {
		require.NotNil(t, v.EmptyDir, v.Name)
		require.NotNil(t, v.EmptyDir.SizeLimit, "volume %s is sized", v.Name)
		sizes[v.Name] = v.EmptyDir.SizeLimit.Value()
	}
	assert.Equal(t, map[string]int64{"home": kubernetes.DefaultHomeBytes, "tmp": kubernetes.DefaultTmpBytes,
		"workspace": kubernetes.DefaultWorkspaceBytes}, sizes)

	// Inside: the cgroup's limits (the pids limit is the pod's, a level
	// above the container's own cgroup, which has none).
	r := run(context.Background(), t, sb, sh(cgroupScript))
	require.NoError(t, r.err)
	require.True(t, r.status.Success(), r.stderr)
	assert.Equal(t, []string{"268435456", "50000", "100000", "max"}, strings.Fields(r.stdout))

	// The root is read-only; home, /tmp and the workspace are writable.
	r = run(context.Background(), t, sb, sh(`touch /probe 2>/dev/null && echo root-writable
touch /usr/probe 2>/dev/null && echo usr-writable
for d in "$HOME" /tmp /workspace; do touch "$d/probe" && echo "$d ok"; done`))
	require.NoError(t, r.err)
	assert.Equal(t, "/home/agent ok\n/tmp ok\n/workspace ok\n", r.stdout, r.stderr)

	// The node's pod pids limit: what acquisition checked, and, for a node
	// on this machine, the pod's own cgroup.
	node := pod.Spec.NodeName
	limit, err := p.NodePidsLimit(context.Background(), node)
	require.NoError(t, err)
	assert.Equal(t, kubernetes.DefaultPids, limit)
	if f := podCgroupFile(string(pod.UID), "pids.max"); f != "" {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Equal(t, "1024", strings.TrimSpace(string(b)), f)
	} else {
		t.Logf("the pod's cgroup is not on this machine: its pids limit is checked through the kubelet's configuration only")
	}

	// A pids limit the node does not apply: a configuration error naming
	// the kind and the flag; the pod is removed.
	_, err = p.Acquire(context.Background(), sandbox.Spec{Pids: 100})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.ErrorContains(t, err, "the kubernetes sandbox cannot apply a pids limit of 100 (--pids-limit): node "+node+" limits each pod to 1024 processes")
	require.Eventually(t, func() bool { return len(podsOfRun(t, p, runID)) == 1 }, 30*time.Second, 200*time.Millisecond,
		"the refused lease's pod is removed")
}

// podCgroupFile finds a file of the pod's pids cgroup on this machine (a
// node of a cluster on this machine): cgroup v1 with the cgroupfs driver,
// else v2; "" when there is none.
func podCgroupFile(uid, name string) string {
	for _, pat := range []string{
		"/sys/fs/cgroup/pids/kubepods*/pod" + uid + "/" + name,
		"/sys/fs/cgroup/pids/kubepods*/*/pod" + uid + "/" + name,
		"/sys/fs/cgroup/kubepods*/pod" + uid + "/" + name,
		"/sys/fs/cgroup/kubepods*/*/pod" + uid + "/" + name,
	} {
		if m, _ := filepath.Glob(pat); len(m) == 1 {
			return m[0]
		}
	}
	return ""
}

// TestPidsLimitReached: forks refused at the pod's pids limit are reported
// by the process ([sandbox.LimitReporter]); a process that stayed under it
// reports nothing, nor does a later failure in the same lease.
func TestPidsLimitReached(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	ctx := context.Background()
	limits := func(sb sandbox.Sandbox, script string) []string {
		t.Helper()
		proc, err := sb.Exec(ctx, sh(script))
		require.NoError(t, err)
		defer proc.Close()
		go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
		go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
		_, err = waitGuard(t, proc, 2*time.Minute)
		require.NoError(t, err)
		lr, ok := proc.(sandbox.LimitReporter)
		require.True(t, ok, "a pod's process reports its lease's limits")
		return lr.LimitsReached(ctx)
	}
	// More sleeps than the pod may have: the shell's fork is refused and
	// it exits; its EXIT trap (a builtin) kills what it started.
	sb := acquire(t, p, sandbox.Spec{})
	assert.Empty(t, limits(sb, `for i in 1 2 3; do sleep 0 & done; wait`), "under the limit")
	assert.Equal(t, []string{sandbox.LimitPids},
		limits(sb, `trap 'kill -s KILL 0' EXIT; i=0; while [ $i -lt 1100 ]; do sleep 1000 & i=$((i+1)); done`))
	assert.Empty(t, limits(sb, `exit 1`), "a later failure in the same lease is not the limit's")
}
