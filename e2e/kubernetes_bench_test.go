package e2e

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
	"github.com/outpost-dev/outpost/sandbox/pool"
)

// BenchmarkKubernetesConcurrent16 starts 16 offline Claude Code turns at
// once (one goroutine each) through one runner whose leases are pods of
// the test cluster, the real CLI copied into each pod, against the
// scripted model server; per iteration, interleaved in alternating order,
// one such batch and one turn alone. Every turn must succeed. Reported:
// the batch's wall time, the per-turn median and p95 inside the batches
// (each turn timed from the batch's start), the lone turn's median, and
// the batch's wall time over 16 lone turns (what the same 16 turns take
// one after another, from the lone turn's median).
func BenchmarkKubernetesConcurrent16(b *testing.B) {
	const n = 16
	kc := testenv.Kubeconfig(b)
	testenv.CLI(b, "claude")
	ctx := context.Background()
	project := b.TempDir()
	require.NoError(b, os.Chmod(project, 0o777))
	r, err := outpost.New(ctx, outpost.Options{Project: project, Offline: true, NoStore: true, Getenv: os.Getenv,
		Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}}})
	require.NoError(b, err)
	defer r.Close()
	seq := 0
	// next names a turn and makes its workspace (each turn its own).
	next := func() (string, string) {
		mark := fmt.Sprintf("MARK-k16-%d", seq)
		seq++
		ws := filepath.Join(project, mark)
		require.NoError(b, os.Mkdir(ws, 0o777))
		require.NoError(b, os.Chmod(ws, 0o777)) // leases of a root host run as uid 1000
		return mark, ws
	}
	turn := func(mark, ws string) error {
		res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "say " + mark, Workspace: ws})
		if err != nil {
			return fmt.Errorf("turn %s: %w (%+v)", mark, err, res)
		}
		if !strings.Contains(res.Text, mark) {
			return fmt.Errorf("turn %s answered %q", mark, res.Text)
		}
		return nil
	}
	// The first turn starts the engine (the runner Job) and the scripted
	// server, and bootstraps the CLI: off the clock.
	require.NoError(b, turn(next()))
	var walls, lone, each []time.Duration
	batch := func() {
		marks, dirs := make([]string, n), make([]string, n)
		for i := range n {
			marks[i], dirs[i] = next()
		}
		took := make([]time.Duration, n)
		errs := make([]error, n)
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = turn(marks[i], dirs[i])
				took[i] = time.Since(t0)
			})
		}
		wg.Wait()
		walls = append(walls, time.Since(t0))
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		each = append(each, took...)
	}
	single := func() {
		mark, ws := next()
		lone = append(lone, timed(func() {
			if err := turn(mark, ws); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		alternate(i, batch, single)
	}
	b.ReportMetric(median(walls), "wall-ms")
	b.ReportMetric(quantile(each, 0.50), "turn-p50-ms")
	b.ReportMetric(quantile(each, 0.95), "turn-p95-ms")
	b.ReportMetric(median(lone), "lone-turn-ms")
	b.ReportMetric(median(walls)/(n*median(lone)), "wall/16-lone")
	b.ReportMetric(float64(len(each)), "turns-ok")
}

// fakeInPod is where a pod lease of the pool benchmark has the fake CLI.
const fakeInPod = "/tmp/outpost-bench/fake-agent"

// withFake is a Kubernetes provider whose leases get the fake CLI (this
// test binary) copied in once they run: a lease has no host mounts, so a
// pooled pod carries its CLI the way the runner delivers a real one, made
// ready before a turn asks.
type withFake struct {
	*kubernetes.Provider
	exe string
}

func (w withFake) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := w.Provider.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(w.exe)
	if err == nil {
		defer f.Close()
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			pr, pw := io.Pipe()
			go func() {
				tw := tar.NewWriter(pw)
				werr := tw.WriteHeader(&tar.Header{Name: path.Base(fakeInPod), Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg})
				if werr == nil {
					_, werr = io.Copy(tw, f)
				}
				if werr == nil {
					werr = tw.Close()
				}
				pw.CloseWithError(werr)
			}()
			err = sb.CopyIn(ctx, path.Dir(fakeInPod), pr)
			_ = pr.Close()
		}
	}
	if err != nil {
		_ = sb.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("copy the fake CLI into %s: %w", sb.ID(), err)
	}
	return sb, nil
}

// rawKubectl runs the fake CLI the plainest way with kubectl: `kubectl
// run` of a pod in the lease image running `sleep infinity` with the
// binary mounted from the node (a hostPath: this cluster's node is this
// machine, so the raw pod pays no copy), `kubectl wait` until it is
// ready, `kubectl exec -i` of the binary fed the script, `kubectl delete`
// (grace period 0, not waiting). It returns the pod's name.
type rawKubectl struct {
	kubectl, kc, ns, exe string
}

func (k rawKubectl) cmd(b *testing.B, stdin string, args ...string) string {
	b.Helper()
	cmd := exec.Command(k.kubectl, append([]string{"--kubeconfig", k.kc, "-n", k.ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (k rawKubectl) turn(b *testing.B) string {
	b.Helper()
	name := "outpost-bench-" + uuid.NewString()[:8]
	uid := int64(1000)
	overrides, err := json.Marshal(map[string]any{"spec": corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid},
		// kubectl merges the overrides into the pod it builds, replacing
		// lists: the container is given whole.
		Containers: []corev1.Container{{Name: name, Image: kubernetes.DefaultImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sleep", "infinity"}, Env: []corev1.EnvVar{{Name: fakecli.ChildEnv, Value: "1"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "fake", MountPath: fakeInContainer, ReadOnly: true}}}},
		Volumes: []corev1.Volume{{Name: "fake", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: k.exe}}}},
	}})
	require.NoError(b, err)
	k.cmd(b, "", "run", name, "--image", kubernetes.DefaultImage, "--image-pull-policy", "Never", "--restart", "Never",
		"--labels", "outpost.dev/bench=raw", "--env", fakecli.ChildEnv+"=1", "--overrides", string(overrides),
		"--command", "--", "sleep", "infinity")
	k.cmd(b, "", "wait", "--for=condition=Ready", "--timeout=2m", "pod/"+name)
	if out := k.cmd(b, benchScript, "exec", "-i", name, "--", fakeInContainer); !strings.Contains(out, `"finished"`) {
		b.Fatalf("kubectl exec %s: no finished event:\n%s", name, out)
	}
	k.cmd(b, "", "delete", "pod", name, "--grace-period=0", "--force", "--wait=false")
	return name
}

// BenchmarkKubernetesPooledTurnVsKubectl: a turn of the fake CLI through
// a warm pool of pod leases (the pod started and the CLI copied in before
// the turn asked; acquired, used once, released — the pod's deletion runs
// in the background) against `kubectl run` + `kubectl exec` of the same
// binary in the same image, interleaved in alternating order. Before each
// case, off the clock, the pool has its lease ready and no removal under
// way, and the last raw pod is gone. OUTPOST_KUBECTL names kubectl
// (scripts/kube-setup.sh caches the cluster's own).
func BenchmarkKubernetesPooledTurnVsKubectl(b *testing.B) {
	kc := testenv.Kubeconfig(b)
	kubectl := os.Getenv("OUTPOST_KUBECTL")
	if kubectl == "" {
		b.Skip("set OUTPOST_KUBECTL to a kubectl binary to compare with kubectl")
	}
	ctx := context.Background()
	kp, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: kc, PullPolicy: corev1.PullNever, Version: "bench"})
	if err != nil {
		testenv.Missing(b, testenv.RequireKubernetesEnv, "a Kubernetes cluster ("+err.Error()+")")
	}
	b.Cleanup(func() { _ = kp.ReleaseAll(context.Background()); _ = kp.Close() })
	exe, err := os.Executable()
	require.NoError(b, err)
	p, err := pool.New(withFake{kp, exe}, pool.Options{Size: 1})
	require.NoError(b, err)
	b.Cleanup(p.Close)
	spec := sandbox.Spec{}
	p.Warm(spec)
	turn := harness.Turn{Adapter: fakecli.New(fakeInPod), Input: adapters.Input{Prompt: benchScript}, Provider: p, Spec: spec}
	raw := rawKubectl{kubectl: kubectl, kc: kc, ns: kp.Namespace(), exe: exe}
	var pooled, kubectlRun []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cases := []func(){
			func() {
				settle(b, p, 1)
				pooled = append(pooled, timed(func() {
					if _, err := harness.Run(ctx, turn); err != nil {
						b.Fatal(err)
					}
				}))
			},
			func() {
				settle(b, p, 1)
				var name string
				kubectlRun = append(kubectlRun, timed(func() { name = raw.turn(b) }))
				raw.cmd(b, "", "wait", "--for=delete", "--timeout=2m", "pod/"+name)
			},
		}
		alternate(i, cases[0], cases[1])
	}
	requireReady(b, p)
	b.ReportMetric(median(pooled), "pooled-ms")
	b.ReportMetric(median(kubectlRun), "kubectl-ms")
	b.ReportMetric(median(pooled)/median(kubectlRun), "ratio")
}
