package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// The benchmarks compare a lease of this provider with the same work done
// the plainest way: a pod created, exec'd and deleted with client-go, or with
// kubectl (OUTPOST_KUBECTL names the binary; scripts/kube-setup.sh caches one
// beside the cluster's binaries). Every one runs `true` in the base image.

// BenchmarkColdLease: Acquire, exec `true`, Release.
func BenchmarkColdLease(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	for b.Loop() {
		coldLease(b, p)
	}
}

func coldLease(b testing.TB, p *kubernetes.Provider) {
	ctx := context.Background()
	sb, err := p.Acquire(ctx, sandbox.Spec{})
	require.NoError(b, err)
	pr, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	require.NoError(b, err)
	st, err := pr.Wait()
	require.NoError(b, err)
	require.True(b, st.Success())
	require.NoError(b, pr.Close())
	require.NoError(b, sb.Release(ctx))
}

// BenchmarkColdRawClientGo: create a plain pod, wait until it runs, exec
// `true`, delete it (grace period 0), with client-go directly.
func BenchmarkColdRawClientGo(b *testing.B) {
	r := newRaw(b)
	for b.Loop() {
		r.cold(b)
	}
}

// BenchmarkColdRawKubectl: the same with kubectl (apply, wait, exec, delete).
func BenchmarkColdRawKubectl(b *testing.B) {
	r := newRaw(b)
	kubectl := kubectlBin(b)
	for b.Loop() {
		name := "outpost-bench-" + uuid.NewString()[:8]
		pod, err := runtimeJSON(r.pod(name))
		require.NoError(b, err)
		r.kubectl(b, kubectl, pod, "create", "-f", "-")
		r.kubectl(b, kubectl, nil, "wait", "--for=condition=Ready", "--timeout=60s", "pod/"+name)
		r.kubectl(b, kubectl, nil, "exec", name, "--", "true")
		r.kubectl(b, kubectl, nil, "delete", "pod", name, "--grace-period=0", "--force", "--wait=false")
	}
}

// BenchmarkWarmExec: exec `true` in a running lease (the per-turn overhead
// of a warm session).
func BenchmarkWarmExec(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	sb := acquire(b, p, sandbox.Spec{})
	ctx := context.Background()
	for b.Loop() {
		pr, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		require.NoError(b, err)
		st, err := pr.Wait()
		require.NoError(b, err)
		require.True(b, st.Success())
		require.NoError(b, pr.Close())
	}
}

// BenchmarkWarmExecRawClientGo: exec `true` in a running plain pod with
// client-go's WebSocket executor.
func BenchmarkWarmExecRawClientGo(b *testing.B) {
	r := newRaw(b)
	name := r.start(b)
	for b.Loop() {
		require.NoError(b, r.exec(name, "true"))
	}
}

// BenchmarkWarmExecRawKubectl: `kubectl exec POD -- true`.
func BenchmarkWarmExecRawKubectl(b *testing.B) {
	r := newRaw(b)
	kubectl := kubectlBin(b)
	name := r.start(b)
	for b.Loop() {
		r.kubectl(b, kubectl, nil, "exec", name, "--", "true")
	}
}

// BenchmarkParallelCold16: 16 cold leases at once (Acquire, exec, Release
// each); one op is the wall time of all 16.
func BenchmarkParallelCold16(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	for b.Loop() {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() { coldLease(b, p) })
		}
		wg.Wait()
	}
}

// BenchmarkParallelCold16RawClientGo: the same with plain client-go pods.
func BenchmarkParallelCold16RawClientGo(b *testing.B) {
	r := newRaw(b)
	for b.Loop() {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() { r.cold(b) })
		}
		wg.Wait()
	}
}

// raw does pod work with client-go and nothing of the provider.
type raw struct {
	cfg *rest.Config
	cs  k8s.Interface
	ns  string
	kc  string
}

func newRaw(b *testing.B) *raw { return newRawT(b) }

func newRawT(b testing.TB) *raw {
	p := newProvider(b, kubernetes.Options{}) // skips without a cluster
	kc := testOptions(b).Kubeconfig
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(b, err)
	cfg.QPS, cfg.Burst = kubernetes.DefaultQPS, kubernetes.DefaultBurst
	cs, err := k8s.NewForConfig(cfg)
	require.NoError(b, err)
	return &raw{cfg: cfg, cs: cs, ns: p.Namespace(), kc: kc}
}

func (r *raw) pod(name string) *corev1.Pod {
	uid := int64(1000)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{"outpost.dev/bench": "raw"}},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name: "main", Image: kubernetes.DefaultImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
			}},
		},
	}
}

// start creates a pod, waits until it runs and deletes it when b ends.
func (r *raw) start(b testing.TB) string { return r.startPod(b, func(*corev1.Pod) {}) }

// startPod is start with the pod changed by mod.
func (r *raw) startPod(b testing.TB, mod func(*corev1.Pod)) string {
	name := "outpost-bench-" + uuid.NewString()[:8]
	pod := r.pod(name)
	mod(pod)
	ctx := context.Background()
	w, err := r.cs.CoreV1().Pods(r.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(b, err)
	defer w.Stop()
	_, err = r.cs.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(b, err)
	b.Cleanup(func() { r.delete(name) })
	timeout := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && pod.Status.Phase == corev1.PodRunning {
				return name
			}
		case <-timeout:
			b.Fatalf("pod %s not running after a minute", name)
		}
	}
}

func (r *raw) delete(name string) {
	zero := int64(0)
	_ = r.cs.CoreV1().Pods(r.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

func (r *raw) exec(name string, argv ...string) error {
	req := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(r.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	return ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
}

func (r *raw) cold(b testing.TB) {
	name := "outpost-bench-" + uuid.NewString()[:8]
	ctx := context.Background()
	w, err := r.cs.CoreV1().Pods(r.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(b, err)
	defer w.Stop()
	_, err = r.cs.CoreV1().Pods(r.ns).Create(ctx, r.pod(name), metav1.CreateOptions{})
	require.NoError(b, err)
	defer r.delete(name)
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning {
			break
		}
	}
	require.NoError(b, r.exec(name, "true"))
}

func (r *raw) kubectl(b testing.TB, kubectl string, stdin []byte, args ...string) {
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", r.kc, "-n", r.ns}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "kubectl %v: %s", args, out)
}

func kubectlBin(b testing.TB) string {
	k := os.Getenv("OUTPOST_KUBECTL")
	if k == "" {
		b.Skip("set OUTPOST_KUBECTL to a kubectl binary to compare with kubectl")
	}
	return k
}

func runtimeJSON(pod *corev1.Pod) ([]byte, error) {
	var buf bytes.Buffer
	if err := scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion).Encode(pod, &buf); err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	return buf.Bytes(), nil
}

// apiCounter counts the requests a client makes, by method and resource
// ("POST pods", "GET pods/exec", "PATCH jobs"); a watch is counted as
// "WATCH <resource>".
type apiCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// counting is one transport of the client, counted by c.
type counting struct {
	c  *apiCounter
	rt http.RoundTripper
}

func (t counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	res := ""
	// /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]], /apis/G/V/namespaces/...
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			res = parts[i+2]
			if i+4 < len(parts) {
				res += "/" + parts[i+4]
			}
			break
		}
	}
	if res == "" {
		res = req.URL.Path
	}
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	c.mu.Lock()
	c.n[verb+" "+res]++
	c.mu.Unlock()
	return t.rt.RoundTrip(req)
}

func (c *apiCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// BenchmarkLeaseAPICalls counts the Kubernetes API requests of one cold
// lease with Spec.Env (so it has a Secret): Acquire, one exec, Release.
// The provider's start (its runner Job) and a first lease are made off
// the clock; each metric is one kind of request per lease, and "renewals"
// is the runner Job renewals per minute measured over the leases.
func BenchmarkLeaseAPICalls(b *testing.B) {
	kc := testOptions(b).Kubeconfig
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(b, err)
	c := &apiCounter{n: map[string]int{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counting{c, rt} }
	p := newProvider(b, kubernetes.Options{RestConfig: cfg})
	ctx := context.Background()
	lease := func() {
		sb, err := p.Acquire(ctx, sandbox.Spec{Env: map[string]string{"OUTPOST_BENCH": "1"}})
		require.NoError(b, err)
		pr, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		require.NoError(b, err)
		_, err = pr.Wait()
		require.NoError(b, err)
		require.NoError(b, pr.Close())
		require.NoError(b, sb.Release(ctx))
	}
	lease()
	before := c.snapshot()
	t0 := time.Now()
	for b.Loop() {
		lease()
	}
	took := time.Since(t0)
	after := c.snapshot()
	total := 0
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		total += d
		if strings.Contains(k, "jobs") {
			b.ReportMetric(float64(d)/took.Minutes(), "per-min:"+strings.ReplaceAll(k, " ", "_"))
			continue
		}
		b.ReportMetric(float64(d)/float64(b.N), strings.ReplaceAll(k, " ", "_"))
	}
	b.ReportMetric(float64(total)/float64(b.N), "requests/lease")
}

// BenchmarkInterleavedWarmExec takes a warm exec of `true` apart. Each
// iteration runs every case once, in the same running lease, rotating their
// order so that every case sees the same load (this machine is shared):
//
//	provider   sb.Exec, Wait, Close
//	raw        client-go WebSocket exec of `true`, no stdin
//	raw-stdin  the same with stdin (a 40-byte input, then EOF)
//	raw-sh     `sh -c 'read -r x; setsid true & wait $!'` with that stdin
//	raw-wrap   the provider's wrapper script and header with a raw exec
//	raw-plain  `true` in a plain pod (none of the lease pod's limits,
//	           seccomp profile or shared PID namespace)
//	raw-plain-seccomp  the same in a plain pod with the RuntimeDefault
//	           seccomp profile the lease pod has
//
// Each case's median is a metric (CASE-ms), with its ratio to raw
// (CASE/raw).
func BenchmarkInterleavedWarmExec(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	sb := acquire(b, p, sandbox.Spec{})
	r := newRaw(b)
	plain := r.start(b)
	seccomp := r.startPod(b, func(p *corev1.Pod) {
		p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	})
	ctx := context.Background()
	pod := sb.ID()
	in := []byte(strings.Repeat("x", 39) + "\n")
	cases := []struct {
		name string
		run  func() error
	}{
		{"provider", func() error {
			pr, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
			if err != nil {
				return err
			}
			st, err := pr.Wait()
			if err == nil && !st.Success() {
				err = fmt.Errorf("exit %v", st)
			}
			return errors.Join(err, pr.Close())
		}},
		{"raw", func() error { return r.execIn(pod, kubernetes.ContainerName, nil, "true") }},
		{"raw-stdin", func() error { return r.execIn(pod, kubernetes.ContainerName, in, "true") }},
		{"raw-sh", func() error {
			return r.execIn(pod, kubernetes.ContainerName, in, "sh", "-c", "read -r x; setsid true & wait $!")
		}},
		{"raw-wrap", func() error {
			argv, hdr := kubernetes.WrapperArgv(strings.ReplaceAll(uuid.NewString(), "-", ""), "true")
			return r.execIn(pod, kubernetes.ContainerName, hdr, argv...)
		}},
		{"raw-plain", func() error { return r.execIn(plain, "main", nil, "true") }},
		{"raw-plain-seccomp", func() error { return r.execIn(seccomp, "main", nil, "true") }},
	}
	took := make([][]time.Duration, len(cases))
	n := 0
	for b.Loop() {
		for k := range cases {
			j := (k + n) % len(cases)
			t0 := time.Now()
			require.NoError(b, cases[j].run(), cases[j].name)
			took[j] = append(took[j], time.Since(t0))
		}
		n++
	}
	rawMed := medianMs(took[1])
	for i, c := range cases {
		m := medianMs(took[i])
		b.ReportMetric(m, c.name+"-ms")
		if i != 1 {
			b.ReportMetric(m/rawMed, c.name+"/raw")
		}
	}
	b.ReportMetric(0, "ns/op")
}

func medianMs(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2]) / 1e6
}

// execIn runs argv in a container of a pod with client-go's WebSocket
// executor, with stdin when it is not nil.
func (r *raw) execIn(name, container string, stdin []byte, argv ...string) error {
	req := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(r.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
	if stdin != nil {
		opts.Stdin = bytes.NewReader(stdin)
	}
	if err := ex.StreamWithContext(context.Background(), opts); err != nil {
		return fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	return nil
}
