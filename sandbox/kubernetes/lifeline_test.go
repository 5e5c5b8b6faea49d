package kubernetes_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// holderEnv makes the test binary a lease holder: TestMain then acquires
// one pod on the cluster of the kubeconfig the variable names, with a
// command running in it, prints the pod's name and waits to be killed.
const holderEnv = "OUTPOST_TEST_KUBERNETES_LEASE_HOLDER"

func TestMain(m *testing.M) {
	if kc := os.Getenv(holderEnv); kc != "" {
		os.Exit(holdLease(kc))
	}
	os.Exit(m.Run())
}

// holdLease is the holder process: it never releases its lease.
func holdLease(kubeconfig string) int {
	ctx := context.Background()
	p, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: kubeconfig, PullPolicy: corev1.PullNever, Version: "test",
		StartTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb, err := p.Acquire(ctx, sandbox.Spec{Env: map[string]string{"K": "v"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "3600"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(sb.ID())
	_, _ = proc.Wait()
	return 0
}

// TestLeaseDiesWithRunner: the pod (and its Secret) of a process killed
// with SIGKILL while it holds a lease, a command running in it, are
// deleted by the cluster within a minute, with nobody running the reaper.
func TestLeaseDiesWithRunner(t *testing.T) {
	ns := newProvider(t, kubernetes.Options{}).Namespace() // skips without a cluster
	cs := clientset(t)
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), holderEnv+"="+testOptions(t).Kubeconfig)
	holder.Stderr = os.Stderr
	out, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the holder did not report its lease")
	name := strings.TrimSpace(line)
	zero := int64(0)
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		_ = cs.CoreV1().Secrets(ns).Delete(context.Background(), name+"-env", metav1.DeleteOptions{})
	})
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodRunning, pod.Status.Phase)
	require.Len(t, pod.OwnerReferences, 1, "the pod names its runner job")
	job := pod.OwnerReferences[0].Name

	require.NoError(t, holder.Process.Signal(syscall.SIGKILL))
	_ = holder.Wait()
	killed := time.Now()
	gone := func(err error) bool {
		if err != nil && !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		return apierrors.IsNotFound(err)
	}
	// The bound is the promise (a minute).
	for {
		_, perr := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		_, serr := cs.CoreV1().Secrets(ns).Get(context.Background(), name+"-env", metav1.GetOptions{})
		_, jerr := cs.BatchV1().Jobs(ns).Get(context.Background(), job, metav1.GetOptions{})
		if gone(perr) && gone(serr) && gone(jerr) {
			break
		}
		require.Less(t, time.Since(killed), 60*time.Second, "pod %s outlived its runner", name)
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("pod, Secret and runner job deleted %v after the runner was killed", time.Since(killed).Round(100*time.Millisecond))
}

// TestLeaseOutlivesGrace: a provider that lives keeps its lease well past
// the runner job's first deadline, and Close deletes the runner job.
func TestLeaseOutlivesGrace(t *testing.T) {
	grace := 3 * time.Second
	p := newProvider(t, kubernetes.Options{RunnerGrace: grace})
	cs := clientset(t)
	ns := p.Namespace()
	sb := acquire(t, p, sandbox.Spec{})
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, pod.OwnerReferences, 1)
	job := pod.OwnerReferences[0].Name
	// Well past the first deadline (the grace) and a few renewals.
	r := run(ctx, t, sb, sandbox.Command{Args: []string{"sleep", "10"}})
	require.NoError(t, r.err)
	require.True(t, r.status.Success(), r.stderr)
	r = run(ctx, t, sb, sandbox.Command{Args: []string{"echo", "alive"}})
	require.True(t, r.status.Success(), r.stderr)
	assert.Equal(t, "alive\n", r.stdout)
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, j.Status.Conditions, "the runner job ended")
	require.NotNil(t, j.Spec.ActiveDeadlineSeconds)
	assert.Greater(t, *j.Spec.ActiveDeadlineSeconds, int64(10), "the deadline was renewed")

	require.NoError(t, sb.Release(ctx))
	require.NoError(t, p.Close())
	_, err = cs.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "Close leaves the runner job: %v", err)
}
