package kubernetes_test

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

func TestHardening(t *testing.T) {
	runID := "test-" + uuid.NewString()
	p := newProvider(t, kubernetes.Options{RunID: runID})
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"OUTPOST_X": "y"}, CPUs: 0.5, MemoryBytes: 256 << 20,
		Labels: map[string]string{"session": "s1"}})
	pod := getPod(t, clientset(t), p.Namespace(), sb.ID())
	require.NotNil(t, pod)

	spec := pod.Spec
	assert.False(t, *spec.AutomountServiceAccountToken)
	assert.False(t, *spec.EnableServiceLinks)
	assert.True(t, *spec.ShareProcessNamespace)
	assert.False(t, spec.HostNetwork)
	assert.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	require.NotNil(t, spec.ActiveDeadlineSeconds)
	assert.Equal(t, int64(kubernetes.DefaultLifetime/time.Second), *spec.ActiveDeadlineSeconds)
	assert.True(t, *spec.SecurityContext.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, spec.SecurityContext.SeccompProfile.Type)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, corev1.PullNever, c.ImagePullPolicy)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.False(t, *c.SecurityContext.Privileged)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, int64(1000), *c.SecurityContext.RunAsUser)
	assert.Equal(t, "500m", c.Resources.Limits.Cpu().String())
	assert.Equal(t, "50m", c.Resources.Requests.Cpu().String())
	assert.Equal(t, int64(256<<20), c.Resources.Limits.Memory().Value())
	var home *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "home" {
			home = &spec.Volumes[i]
		}
	}
	require.NotNil(t, home)
	assert.Equal(t, corev1.StorageMediumMemory, home.EmptyDir.Medium)

	assert.Equal(t, "true", pod.Labels[kubernetes.LabelManaged])
	assert.Equal(t, runID, pod.Labels[kubernetes.LabelRun])
	assert.Equal(t, "s1", pod.Labels[kubernetes.LabelSession])
	assert.Equal(t, strconv.Itoa(os.Getpid()), pod.Labels[kubernetes.LabelOwnerPID])
	assert.NotEmpty(t, pod.Labels[kubernetes.LabelCreated])
	assert.NotEmpty(t, pod.Annotations[kubernetes.AnnotationHeartbeat])

	// Inside: the user, no capabilities, no new privileges, seccomp, no token.
	r := run(context.Background(), t, sb, sh(`id -u; id -g
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status
test -e /var/run/secrets/kubernetes.io/serviceaccount && echo token || echo no-token
stat -c %a "$HOME"`))
	require.NoError(t, r.err)
	require.True(t, r.status.Success(), r.stderr)
	assert.Equal(t, "1000\n1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nno-token\n700\n", r.stdout)

	// The heartbeat moves.
	first := pod.Annotations[kubernetes.AnnotationHeartbeat]
	require.Eventually(t, func() bool {
		pod := getPod(t, clientset(t), p.Namespace(), sb.ID())
		return pod != nil && pod.Annotations[kubernetes.AnnotationHeartbeat] != first
	}, 20*time.Second, 200*time.Millisecond, "heartbeat annotation refreshed")

	// Root is refused.
	_, err := p.Acquire(context.Background(), sandbox.Spec{User: "0:0"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = p.Acquire(context.Background(), sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/tmp", Target: "/x"}}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.Len(t, podsOfRun(t, p, runID), 1, "refused leases create no pod")
}

// TestSecretsStayOutOfThePodSpec: a marker in Spec.Env is only in the
// lease's Secret, and only while the lease lives; a marker in Command.Env is
// in neither the pod nor the Secret; both reach the process.
func TestSecretsStayOutOfThePodSpec(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	specSecret := "outpost-spec-marker-" + uuid.NewString()
	cmdSecret := "outpost-cmd-marker-" + uuid.NewString()
	sb := acquire(t, p, sandbox.Spec{Env: map[string]string{"OUTPOST_API_KEY": specSecret}})
	cs := clientset(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, err := sb.Exec(ctx, sandbox.Command{
		Args: []string{"sh", "-c", `echo started; exec sleep 1000`},
		Env:  map[string]string{"OUTPOST_CMD_KEY": cmdSecret},
	})
	require.NoError(t, err)
	defer holder.Close()
	line, _ := bufio.NewReader(holder.Stdout()).ReadString('\n')
	require.Equal(t, "started\n", line)

	r := run(ctx, t, sb, sandbox.Command{Args: []string{"sh", "-c", `printf '%s %s' "$OUTPOST_API_KEY" "$OUTPOST_CMD_KEY"`},
		Env: map[string]string{"OUTPOST_CMD_KEY": cmdSecret}})
	require.NoError(t, r.err)
	assert.Equal(t, specSecret+" "+cmdSecret, r.stdout, "both values reach the process")

	pod := getPod(t, cs, p.Namespace(), sb.ID())
	require.NotNil(t, pod)
	podJSON, err := json.Marshal(pod)
	require.NoError(t, err)
	assert.NotContains(t, string(podJSON), specSecret, "a Spec.Env value is in the pod object")
	assert.NotContains(t, string(podJSON), cmdSecret, "a Command.Env value is in the pod object")
	assert.Contains(t, string(podJSON), sb.ID()+"-env", "the pod references its Secret")

	events, err := cs.CoreV1().Events(p.Namespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + sb.ID()})
	require.NoError(t, err)
	evJSON, err := json.Marshal(events)
	require.NoError(t, err)
	assert.NotContains(t, string(evJSON), specSecret)
	assert.NotContains(t, string(evJSON), cmdSecret)

	secret, err := cs.CoreV1().Secrets(p.Namespace()).Get(ctx, sb.ID()+"-env", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, specSecret, string(secret.Data["OUTPOST_API_KEY"]), "the Spec.Env value is in the Secret")
	secJSON, err := json.Marshal(secret)
	require.NoError(t, err)
	assert.NotContains(t, string(secJSON), cmdSecret, "a Command.Env value is in the Secret")
	require.Len(t, secret.OwnerReferences, 1, "the pod owns its Secret")
	assert.Equal(t, pod.UID, secret.OwnerReferences[0].UID)

	require.NoError(t, sb.Release(ctx))
	_, err = cs.CoreV1().Secrets(p.Namespace()).Get(ctx, sb.ID()+"-env", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Secret is gone after Release: %v", err)
	st, err := waitGuard(t, holder, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "SIGKILL", st.Signal)
}

func TestPodDeletedMidExec(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			sb := acquire(t, p, sandbox.Spec{})
			proc, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sleep", "1000"}})
			require.NoError(t, err)
			defer proc.Close()
			opts := metav1.DeleteOptions{}
			if force {
				zero := int64(0)
				opts.GracePeriodSeconds = &zero
			}
			require.NoError(t, clientset(t).CoreV1().Pods(p.Namespace()).Delete(context.Background(), sb.ID(), opts))
			start := time.Now()
			st, err := waitGuard(t, proc, 30*time.Second)
			t.Logf("Wait returned %v after %v: %v", st, time.Since(start), err)
			requireSandboxErr(t, err)
			assert.Contains(t, err.Error(), "deleted")
			assert.False(t, st.Success())
			// The lease says it is gone (sandbox.Vanishing): the harness
			// makes the turn a sandbox failure, not the CLI's.
			assert.Contains(t, sandbox.GoneReason(context.Background(), sb), "pod "+sb.ID()+" ")

			_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
			requireSandboxErr(t, err, "exec in a deleted pod")
			require.NoError(t, sb.Release(context.Background()), "Release of a deleted pod succeeds")
			assert.Empty(t, sandbox.GoneReason(context.Background(), sb), "a released lease is not reported gone")
		})
	}
}

// proxy forwards TCP connections from a loopback port to target until
// closed; Close also cuts the connections in flight.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	px := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			px.mu.Lock()
			px.conns = append(px.conns, c, u)
			px.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(px.Close)
	return px
}

func (px *proxy) Close() {
	px.ln.Close()
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, c := range px.conns {
		c.Close()
	}
	px.conns = nil
}

func TestAPIServerUnreachable(t *testing.T) {
	base := newProvider(t, kubernetes.Options{})
	cfg, err := clientcmd.BuildConfigFromFlags("", testOptions(t).Kubeconfig)
	require.NoError(t, err)

	// Nothing listens: New fails fast with a sandbox error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	bad := *cfg
	bad.Host = "https://" + dead
	_, err = kubernetes.New(context.Background(), kubernetes.Options{RestConfig: &bad, PingTimeout: 2 * time.Second})
	requireSandboxErr(t, err)
	assert.Contains(t, err.Error(), "unreachable")

	// The API server goes away while a command runs.
	px := newProxy(t, strings.TrimPrefix(cfg.Host, "https://"))
	via := *cfg
	via.Host = "https://" + px.ln.Addr().String()
	// Not newProvider: its cleanup would try to release through the dead proxy.
	p, err := kubernetes.New(context.Background(), kubernetes.Options{RestConfig: &via, PullPolicy: corev1.PullNever,
		ReleaseTimeout: 3 * time.Second, OpTimeout: 3 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	sb, err := p.Acquire(context.Background(), sandbox.Spec{Env: map[string]string{"K": "v"}})
	require.NoError(t, err)
	name := sb.ID()
	t.Cleanup(func() {
		zero := int64(0)
		_ = clientset(t).CoreV1().Pods(base.Namespace()).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		_ = clientset(t).CoreV1().Secrets(base.Namespace()).Delete(context.Background(), name+"-env", metav1.DeleteOptions{})
	})
	proc, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sleep", "1000"}})
	require.NoError(t, err)
	defer proc.Close()
	time.Sleep(300 * time.Millisecond)
	px.Close()
	start := time.Now()
	_, err = waitGuard(t, proc, 30*time.Second)
	t.Logf("Wait returned after %v: %v", time.Since(start), err)
	requireSandboxErr(t, err)

	_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
	requireSandboxErr(t, err, "exec with the API server gone")
	err = sb.Release(context.Background())
	requireSandboxErr(t, err, "release with the API server gone")

	// A new lease cannot start either.
	_, err = p.Acquire(context.Background(), sandbox.Spec{})
	requireSandboxErr(t, err)
}

func TestStartFailures(t *testing.T) {
	runID := "test-" + uuid.NewString()
	p := newProvider(t, kubernetes.Options{RunID: runID, StartTimeout: 4 * time.Second})

	_, err := p.Acquire(context.Background(), sandbox.Spec{Image: "outpost/no-such-image:none", Env: map[string]string{"K": "v"}})
	requireSandboxErr(t, err)
	assert.Contains(t, err.Error(), "not on the node")

	// More CPU asked for than any node has (the request; limits alone do
	// not stop scheduling).
	huge := newProvider(t, kubernetes.Options{RunID: runID, StartTimeout: 4 * time.Second, CPUs: -1, CPURequest: 10000})
	_, err = huge.Acquire(context.Background(), sandbox.Spec{})
	requireSandboxErr(t, err)
	assert.Contains(t, err.Error(), "unschedulable")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = huge.Acquire(ctx, sandbox.Spec{})
	require.Error(t, err)

	assert.Empty(t, podsOfRun(t, p, runID), "failed starts leave no pod")
	secrets, err := clientset(t).CoreV1().Secrets(p.Namespace()).List(context.Background(),
		metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + runID})
	require.NoError(t, err)
	assert.Empty(t, secrets.Items, "failed starts leave no Secret")
}

func TestHostNetworkReachesLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from the host\n")
			c.Close()
		}
	}()
	p := newProvider(t, kubernetes.Options{})
	sb := acquire(t, p, sandbox.Spec{Network: "host"})
	assert.True(t, getPod(t, clientset(t), p.Namespace(), sb.ID()).Spec.HostNetwork)
	r := run(context.Background(), t, sb, sandbox.Command{Args: []string{"socat", "-u", "TCP:" + ln.Addr().String(), "-"}})
	require.NoError(t, r.err)
	assert.Equal(t, "hello from the host\n", r.stdout, r.stderr)
}

func TestSignalsReachTheCommand(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	sb := acquire(t, p, sandbox.Spec{})
	// sh ignores SIGINT for background jobs; the wrapper must undo that.
	proc, err := sb.Exec(context.Background(), sh(`trap 'echo got INT; exit 0' INT; echo ready; while :; do sleep 0.1; done`))
	require.NoError(t, err)
	defer proc.Close()
	br := bufio.NewReader(proc.Stdout())
	line, _ := br.ReadString('\n')
	require.Equal(t, "ready\n", line)
	require.NoError(t, proc.Signal(syscall.SIGINT))
	st, err := waitGuard(t, proc, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, sandbox.ExitStatus{}, st)
	rest, _ := io.ReadAll(br)
	assert.Equal(t, "got INT\n", string(rest))
}

func TestOOMKilled(t *testing.T) {
	p := newProvider(t, kubernetes.Options{HomeBytes: 16 << 20})
	sb := acquire(t, p, sandbox.Spec{MemoryBytes: 96 << 20})
	r := run(context.Background(), t, sb, sh(`head -c 400m /dev/zero | tail`))
	require.NoError(t, r.err)
	assert.True(t, r.status.OOMKilled, "status %v", r.status)
	assert.Equal(t, "SIGKILL", r.status.Signal)
	// The lease survives; a normal command is not flagged.
	r = run(context.Background(), t, sb, sh(`exit 1`))
	assert.Equal(t, sandbox.ExitStatus{Code: 1}, r.status)
}

func TestWorkspaceSync(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(body), mode))
	}
	write("keep.txt", "keep\n", 0o644)
	write("remove-me.txt", "bye\n", 0o644)
	write("dir/nested.txt", "nested\n", 0o600)
	require.NoError(t, os.Symlink("keep.txt", filepath.Join(ws, "link")))
	p := newProvider(t, kubernetes.Options{})
	sb := acquire(t, p, sandbox.Spec{Workspace: ws})

	r := run(context.Background(), t, sb, sh(`cat keep.txt dir/nested.txt; readlink link; stat -c %a dir/nested.txt`))
	require.NoError(t, r.err)
	assert.Equal(t, "keep\nnested\nkeep.txt\n600\n", r.stdout, "the workspace was copied in")

	// Host files created during the lease are left alone.
	write("host-later.txt", "host\n", 0o644)
	r = run(context.Background(), t, sb, sh(`set -e
rm remove-me.txt
mkdir -p new/deep && printf 'made in the pod' > new/deep/file && chmod 751 new/deep/file
echo changed > keep.txt
ln -s `+outside+` escape
ln -s ../../../etc up
cp -p /etc/hostname copied-with-old-mtime`))
	require.NoError(t, r.err)
	require.True(t, r.status.Success(), r.stderr)

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(ws, name))
		require.NoError(t, err, name)
		return string(b)
	}
	assert.Equal(t, "changed\n", read("keep.txt"))
	assert.Equal(t, "made in the pod", read("new/deep/file"))
	assert.NotEmpty(t, read("copied-with-old-mtime"), "a file whose mtime is old is still synced")
	assert.Equal(t, "host\n", read("host-later.txt"))
	fi, err := os.Stat(filepath.Join(ws, "new/deep/file"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm())
	for _, gone := range []string{"remove-me.txt", "escape", "up"} {
		_, err := os.Lstat(filepath.Join(ws, gone))
		assert.ErrorIs(t, err, os.ErrNotExist, gone)
	}

	// A command that changes nothing under Root costs no sync: the pod's
	// sync stamp stays as it was; one that changes something moves it.
	stamp := func() string {
		r := run(context.Background(), t, sb, sh(`stat -c %y /tmp/.outpost-sync.stamp`))
		require.True(t, r.status.Success(), r.stderr)
		return r.stdout
	}
	before := stamp()
	run(context.Background(), t, sb, sh(`cat keep.txt >/dev/null`))
	assert.Equal(t, before, stamp(), "a read-only command synced the workspace")
	run(context.Background(), t, sb, sh(`echo x > touched`))
	assert.NotEqual(t, before, stamp(), "a write was not synced")
	assert.Equal(t, "x\n", read("touched"))

	// A directory removed in the pod goes on the host too.
	r = run(context.Background(), t, sb, sh(`rm -r new`))
	require.True(t, r.status.Success(), r.stderr)
	_, err = os.Lstat(filepath.Join(ws, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestReaperRemovesLeasesOfAKilledOwner runs an owner process that acquires
// a lease (with a Secret) and is killed with SIGKILL; Reap then finds its pod
// and Secret, lists them in a dry run and removes them.
func TestReaperRemovesLeasesOfAKilledOwner(t *testing.T) {
	if os.Getenv("OUTPOST_K8S_REAP_OWNER") == "1" {
		reapOwner(t)
		return
	}
	p := newProvider(t, kubernetes.Options{})
	runID := "test-reap-" + uuid.NewString()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperRemovesLeasesOfAKilledOwner$", "-test.v")
	cmd.Env = append(os.Environ(), "OUTPOST_K8S_REAP_OWNER=1", "OUTPOST_K8S_REAP_RUN="+runID)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	br := bufio.NewReader(out)
	pod := ""
	for pod == "" {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "owner ended before it acquired a lease")
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "LEASE "); ok {
			pod = rest
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	cs := clientset(t)
	mine := func(ls []kubernetes.Leftover) (names []string) {
		for _, l := range ls {
			if l.Labels[kubernetes.LabelRun] == runID {
				names = append(names, l.Kind+" "+l.Name)
				if l.Kind == "pod" {
					assert.Contains(t, l.Reason, "is gone")
				}
			}
		}
		return names
	}
	want := []string{"pod " + pod, "secret " + pod + "-env"}
	ls, err := p.Reap(context.Background(), kubernetes.ReapOptions{ReapOptions: sandbox.ReapOptions{DryRun: true}})
	require.NoError(t, err)
	assert.ElementsMatch(t, want, mine(ls))
	require.NotNil(t, getPod(t, cs, p.Namespace(), pod), "a dry run removes nothing")

	// This test's own live leases are not touched.
	live := acquire(t, p, sandbox.Spec{Env: map[string]string{"K": "v"}})
	ls, err = p.Reap(context.Background(), kubernetes.ReapOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, want, mine(ls))
	for _, l := range ls {
		assert.NotEqual(t, live.ID(), l.Name)
		if l.Labels[kubernetes.LabelRun] == runID {
			assert.True(t, l.Removed)
		}
	}
	assert.Nil(t, getPod(t, cs, p.Namespace(), pod), "the pod is gone")
	_, err = cs.CoreV1().Secrets(p.Namespace()).Get(context.Background(), pod+"-env", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Secret is gone: %v", err)
	assert.NotNil(t, getPod(t, cs, p.Namespace(), live.ID()), "a live lease is kept")
}

// reapOwner is the owner process of TestReaperRemovesLeasesOfAKilledOwner.
func reapOwner(t *testing.T) {
	p, err := kubernetes.New(context.Background(), kubernetes.Options{Kubeconfig: testOptions(t).Kubeconfig,
		PullPolicy: corev1.PullNever, RunID: os.Getenv("OUTPOST_K8S_REAP_RUN")})
	require.NoError(t, err)
	sb, err := p.Acquire(context.Background(), sandbox.Spec{Env: map[string]string{"K": "v"}})
	require.NoError(t, err)
	fmt.Printf("LEASE %s\n", sb.ID())
	time.Sleep(time.Minute) // killed long before
	_ = sb.Release(context.Background())
}

func TestReleaseAll(t *testing.T) {
	runID := "test-" + uuid.NewString()
	p := newProvider(t, kubernetes.Options{RunID: runID})
	for range 3 {
		_, err := p.Acquire(context.Background(), sandbox.Spec{})
		require.NoError(t, err)
	}
	assert.Len(t, p.Live(), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, p.ReleaseAll(ctx), "ReleaseAll works with a cancelled context")
	assert.Empty(t, p.Live())
	assert.Empty(t, podsOfRun(t, p, runID))
}

func TestCleanupOnSignal(t *testing.T) {
	runID := "test-" + uuid.NewString()
	p := newProvider(t, kubernetes.Options{RunID: runID})
	_, err := p.Acquire(context.Background(), sandbox.Spec{Env: map[string]string{"K": "v"}})
	require.NoError(t, err)
	done := make(chan error, 1)
	stop := sandbox.CleanupOnSignal(p.ReleaseAll, 0, func(err error) { done <- err }, syscall.SIGUSR1)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("no cleanup after the signal")
	}
	assert.Empty(t, p.Live())
	assert.Empty(t, podsOfRun(t, p, runID))
}

// slowTar is a tar stream of one large file whose bytes trickle in.
type slowTar struct{ r io.Reader }

func (s slowTar) Read(b []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return s.r.Read(b[:min(len(b), 4096)])
}

// TestCopyInCancelled: a copy into a pod whose context is cancelled midway
// returns promptly with an error, and the lease still releases.
func TestCopyInCancelled(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Release(context.Background()) })
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		_ = tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: 64 << 20, Typeflag: tar.TypeReg})
		_, err := io.Copy(tw, io.LimitReader(zeros{}, 64<<20))
		_ = tw.Close()
		pw.CloseWithError(err)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	start := time.Now()
	err = sb.CopyIn(ctx, "/tmp/cancelled", slowTar{pr})
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, 30*time.Second, "CopyIn returned %v after the cancel", took)
	require.NoError(t, sb.Release(context.Background()))
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
