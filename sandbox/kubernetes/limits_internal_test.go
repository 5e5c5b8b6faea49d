package kubernetes

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// testPod builds the pod of a lease of a provider with opts (defaults
// filled in) for spec, without a cluster.
func testPod(t *testing.T, opts Options, spec sandbox.Spec, sc *Sidecar) *corev1.Pod {
	t.Helper()
	p := &Provider{log: slog.New(slog.DiscardHandler), opts: opts.withDefaults(), ns: "default"}
	l := newLease(p, "0123456789abcdef0123", DefaultUser, "")
	t.Cleanup(l.cancel)
	l.sidecar = sc
	pod, err := p.podFor(l, spec, p.opts.Image, false, 1000, 1000, map[string]string{}, map[string]string{})
	require.NoError(t, err)
	return pod
}

func container(t *testing.T, pod *corev1.Pod, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("pod has no container %s", name)
	return corev1.Container{}
}

func volumes(pod *corev1.Pod) map[string]corev1.Volume {
	out := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		out[v.Name] = v
	}
	return out
}

// TestPodResourcesDefault: a lease gets the Docker provider's default
// limits, small requests, and an ephemeral-storage limit covering its
// volumes.
func TestPodResourcesDefault(t *testing.T) {
	c := container(t, testPod(t, Options{}, sandbox.Spec{}, nil), containerName)
	lim, req := c.Resources.Limits, c.Resources.Requests
	assert.Equal(t, "2", lim.Cpu().String())
	assert.Equal(t, int64(4<<30), lim.Memory().Value())
	assert.Equal(t, DefaultTmpBytes+DefaultWorkspaceBytes+ephemeralSlackBytes, lim.StorageEphemeral().Value())
	assert.Equal(t, "50m", req.Cpu().String(), "a small CPU request, so a 2-core node runs many leases")
	assert.Equal(t, DefaultMemoryRequestBytes, req.Memory().Value())
	assert.Equal(t, ephemeralRequestBytes, req.StorageEphemeral().Value())
	assert.Equal(t, DefaultCPUs, 2.0)
	assert.Equal(t, DefaultPids, int64(1024))
}

// TestPodResourcesFromSpecAndOptions: Spec wins over Options; requests are
// capped at small limits; negative Options mean no limit (and the request
// stays, never defaulting to a limit).
func TestPodResourcesFromSpecAndOptions(t *testing.T) {
	c := container(t, testPod(t, Options{CPUs: 1, MemoryBytes: 1 << 30}, sandbox.Spec{CPUs: 0.02, MemoryBytes: 64 << 20}, nil), containerName)
	assert.Equal(t, "20m", c.Resources.Limits.Cpu().String())
	assert.Equal(t, "20m", c.Resources.Requests.Cpu().String(), "capped at the limit")
	assert.Equal(t, int64(64<<20), c.Resources.Limits.Memory().Value())
	assert.Equal(t, int64(64<<20), c.Resources.Requests.Memory().Value(), "capped at the limit")

	c = container(t, testPod(t, Options{CPUs: 1, MemoryBytes: 1 << 30}, sandbox.Spec{}, nil), containerName)
	assert.Equal(t, "1", c.Resources.Limits.Cpu().String())
	assert.Equal(t, int64(1<<30), c.Resources.Limits.Memory().Value())

	c = container(t, testPod(t, Options{CPUs: -1, MemoryBytes: -1, EphemeralStorageBytes: -1}, sandbox.Spec{}, nil), containerName)
	assert.Empty(t, c.Resources.Limits, "negative: no limit")
	assert.Equal(t, "50m", c.Resources.Requests.Cpu().String())
	assert.Equal(t, DefaultMemoryRequestBytes, c.Resources.Requests.Memory().Value())
	_, disk := c.Resources.Requests[corev1.ResourceEphemeralStorage]
	assert.False(t, disk)
}

// TestPodReadOnlyRootAndSizedVolumes: the lease container's root is
// read-only; what it can write is the memory-backed home and the sized
// /tmp and workspace volumes (and the sidecar its own sized volume).
func TestPodReadOnlyRootAndSizedVolumes(t *testing.T) {
	pod := testPod(t, Options{TmpBytes: 3 << 30}, sandbox.Spec{}, &Sidecar{Binary: "/bin/true", User: DefaultSidecarUser, MemoryBytes: 1 << 20})
	c := container(t, pod, containerName)
	require.NotNil(t, c.SecurityContext.ReadOnlyRootFilesystem)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
		assert.False(t, m.ReadOnly)
	}
	assert.Equal(t, map[string]string{"/home": "home", "/tmp": "tmp", "/workspace": "workspace"}, mounts)
	vs := volumes(pod)
	require.Len(t, vs, 4)
	for name, want := range map[string]int64{"home": DefaultHomeBytes, "tmp": 3 << 30, "workspace": DefaultWorkspaceBytes, "sidecar": sidecarVolumeBytes} {
		v := vs[name]
		require.NotNil(t, v.EmptyDir, name)
		require.NotNil(t, v.EmptyDir.SizeLimit, "%s has a size limit", name)
		assert.Equal(t, want, v.EmptyDir.SizeLimit.Value(), name)
	}
	assert.Equal(t, corev1.StorageMediumMemory, vs["home"].EmptyDir.Medium)
	assert.Equal(t, corev1.StorageMediumDefault, vs["tmp"].EmptyDir.Medium, "on disk: /tmp holds the copied CLI")
	sc := container(t, pod, sidecarContainer)
	assert.True(t, *sc.SecurityContext.ReadOnlyRootFilesystem)
}

func TestParsePodPidsLimit(t *testing.T) {
	for body, want := range map[string]int64{
		`{"kubeletconfig":{"podPidsLimit":1024}}`: 1024,
		`{"kubeletconfig":{"podPidsLimit":-1}}`:   NoPidsLimit,
		`{"kubeletconfig":{"podPidsLimit":0}}`:    NoPidsLimit,
		`{"kubeletconfig":{"maxPods":110}}`:       NoPidsLimit,
	} {
		got, err := parsePodPidsLimit([]byte(body))
		require.NoError(t, err, body)
		assert.Equal(t, want, got, body)
	}
	for _, body := range []string{`{}`, `not json`} {
		_, err := parsePodPidsLimit([]byte(body))
		assert.Error(t, err, body)
	}
}

// TestCheckPids: a limit the node applies passes, no limit needed is never
// checked, and a limit the node does not apply (another one, or none) is a
// configuration error naming the kind and the flag.
func TestCheckPids(t *testing.T) {
	p := &Provider{log: slog.New(slog.DiscardHandler), nodePids: map[string]int64{"n1": 1024, "n2": NoPidsLimit}}
	ctx := t.Context()
	assert.NoError(t, p.checkPids(ctx, "n1", 1024))
	assert.NoError(t, p.checkPids(ctx, "n2", -1))
	err := p.checkPids(ctx, "n1", 100)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.ErrorContains(t, err, "the kubernetes sandbox cannot apply a pids limit of 100 (--pids-limit): node n1 limits each pod to 1024 processes")
	err = p.checkPids(ctx, "n2", 1024)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.ErrorContains(t, err, "node n2 does not limit the processes of its pods; set podPidsLimit: 1024")
	assert.ErrorContains(t, err, "--pids-limit 0")
}

func TestOOMKilledContainer(t *testing.T) {
	term := func(reason string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: 137}
	}
	assert.False(t, oomKilled(nil))
	assert.False(t, oomKilled(&corev1.Pod{}))
	assert.True(t, oomKilled(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: containerName, State: corev1.ContainerState{Terminated: term("OOMKilled")}}}}}))
	assert.True(t, oomKilled(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: containerName, LastTerminationState: corev1.ContainerState{Terminated: term("OOMKilled")}}}}}))
	assert.False(t, oomKilled(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: containerName, State: corev1.ContainerState{Terminated: term("Error")}},
		{Name: sidecarContainer, State: corev1.ContainerState{Terminated: term("OOMKilled")}}}}}), "the sidecar's is not the lease's")
}
