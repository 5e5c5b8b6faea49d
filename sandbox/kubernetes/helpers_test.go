package kubernetes_test

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// The tests run against the cluster whose kubeconfig OUTPOST_KUBECONFIG
// names (scripts/kube-setup.sh prints it). Images come from the node's
// runtime only: the pull policy is Never, so no test ever reaches a registry.

var (
	probeOnce sync.Once
	probeErr  error
)

// testOptions is the base configuration of every test provider.
func testOptions(t testing.TB) kubernetes.Options {
	t.Helper()
	kc := testenv.Kubeconfig(t)
	return kubernetes.Options{
		Kubeconfig:        kc,
		PullPolicy:        corev1.PullNever,
		Version:           "test",
		StartTimeout:      time.Minute,
		HeartbeatInterval: 2 * time.Second,
	}
}

// newProvider returns a provider for the test cluster, or skips (fails in
// CI) when there is none.
func newProvider(t testing.TB, opts kubernetes.Options) *kubernetes.Provider {
	t.Helper()
	base := testOptions(t)
	if opts.Kubeconfig == "" && opts.RestConfig == nil {
		opts.Kubeconfig = base.Kubeconfig
	}
	opts.PullPolicy = cmpOr(opts.PullPolicy, base.PullPolicy)
	opts.Version = cmpOr(opts.Version, base.Version)
	if opts.StartTimeout == 0 {
		opts.StartTimeout = base.StartTimeout
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = base.HeartbeatInterval
	}
	probeOnce.Do(func() {
		_, probeErr = kubernetes.New(context.Background(), kubernetes.Options{Kubeconfig: base.Kubeconfig})
	})
	if probeErr != nil {
		testenv.Missing(t, testenv.RequireKubernetesEnv, "a Kubernetes cluster ("+probeErr.Error()+")")
	}
	p, err := kubernetes.New(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, p.ReleaseAll(ctx), "release leftovers")
		_ = p.Close()
	})
	return p
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// acquire leases a pod and releases it when the test ends.
func acquire(t testing.TB, p sandbox.Provider, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	return acquireWith(t, func(ctx context.Context) (sandbox.Sandbox, error) { return p.Acquire(ctx, spec) })
}

// acquireWith leases a pod with acquire and releases it when the test ends.
func acquireWith(t testing.TB, acquire func(context.Context) (sandbox.Sandbox, error)) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, sb.Release(ctx))
	})
	return sb
}

type result struct {
	stdout, stderr string
	status         sandbox.ExitStatus
	err            error
}

// run executes cmd to completion (bounded by a hang guard).
func run(ctx context.Context, t testing.TB, sb sandbox.Sandbox, cmd sandbox.Command) result {
	t.Helper()
	p, err := sb.Exec(ctx, cmd)
	require.NoError(t, err, "exec %s", cmd.Redacted())
	defer p.Close()
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&stdout, p.Stdout()) })
	wg.Go(func() { _, _ = io.Copy(&stderr, p.Stderr()) })
	st, werr := waitGuard(t, p, time.Minute)
	// Wait returns at the process's exit, which the wrapper reports on
	// stderr; stdout is another stream and may still be arriving (a loaded
	// API server or kubelet delivers it later). Read it to its end before
	// Close stops the reading; the bound is for a command that left a
	// child holding its output.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
	}
	require.NoError(t, p.Close())
	<-drained
	return result{stdout: stdout.String(), stderr: stderr.String(), status: st, err: werr}
}

// waitGuard waits for p, failing the test if it hangs past d.
func waitGuard(t testing.TB, p sandbox.Process, d time.Duration) (sandbox.ExitStatus, error) {
	t.Helper()
	type res struct {
		st  sandbox.ExitStatus
		err error
	}
	ch := make(chan res, 1)
	go func() {
		st, err := p.Wait()
		ch <- res{st, err}
	}()
	select {
	case r := <-ch:
		return r.st, r.err
	case <-time.After(d):
		t.Fatalf("Wait did not return within %v", d)
	}
	return sandbox.ExitStatus{}, nil
}

func sh(script string, args ...string) sandbox.Command {
	return sandbox.Command{Args: append([]string{"sh", "-c", script, "sh"}, args...)}
}

// getPod reads a lease's pod; nil when it does not exist.
func getPod(t testing.TB, cs k8s.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return pod
}

// clientset is a full API client on the test cluster, to look at what a
// provider made from outside it.
func clientset(t testing.TB) k8s.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testOptions(t).Kubeconfig)
	require.NoError(t, err)
	cs, err := k8s.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// podsOfRun lists the pods labelled with run id.
func podsOfRun(t testing.TB, p *kubernetes.Provider, runID string) []corev1.Pod {
	t.Helper()
	l, err := clientset(t).CoreV1().Pods(p.Namespace()).List(context.Background(),
		metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + runID})
	require.NoError(t, err)
	return l.Items
}

func requireSandboxErr(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "want a sandbox error, got %v", err)
}
