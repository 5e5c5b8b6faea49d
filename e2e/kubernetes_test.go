package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// kubeClient is a client of the test cluster.
func kubeClient(t *testing.T, kubeconfig string) k8s.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := k8s.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// kubeExec runs script in a container of a pod of the test cluster and
// returns what it printed on standard output.
func kubeExec(t *testing.T, kubeconfig, ns, pod, container, script string) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := k8s.NewForConfig(cfg)
	require.NoError(t, err)
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"sh", "-c", script},
			Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}), stderr.String())
	return stdout.String()
}

// kubeLeft lists the pods and Secrets labelled with owner pid pid.
func kubeLeft(t *testing.T, cs k8s.Interface, pid int) []string {
	t.Helper()
	sel := kubernetes.LabelOwnerPID + "=" + strconv.Itoa(pid)
	var out []string
	pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, "pod/"+p.Name)
		}
	}
	secrets, err := cs.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		if s.DeletionTimestamp == nil {
			out = append(out, "secret/"+s.Name)
		}
	}
	return out
}

// kubeRunner is a runner whose leases are pods of the test cluster, the
// real CLIs copied in, against srv.
func kubeRunner(t *testing.T, kubeconfig, project string, store conversation.Store, srv ...outposttest.Option) *outpost.Runner {
	t.Helper()
	o := outpost.Options{Project: project, Offline: true, OfflineServer: srv, Getenv: os.Getenv, Store: store, NoStore: store == nil,
		Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kubeconfig}}}
	r, err := outpost.New(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// TestKubernetesRealCLIs runs Claude Code, Codex and Copilot in pods against
// the scripted server: ok, a tool call writing a file into the workspace
// (synced back), resume and fork in new pods, quota with its reset, and a
// cancelled turn; no pod or Secret of this process is left.
func TestKubernetesRealCLIs(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	ctx := context.Background()
	reset := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	for _, agent := range []string{"claude", "codex", "copilot"} {
		t.Run(agent, func(t *testing.T) {
			ws := workspace(t)
			store, err := conversation.NewFileStore(t.TempDir(), nil)
			require.NoError(t, err)
			r := kubeRunner(t, kc, ws, store, outposttest.WithQuotaReset(reset))

			res, err := r.Run(ctx, outpost.Turn{Agent: agent, Prompt: "say MARK-k8s-" + agent})
			require.NoError(t, err, "%+v", res)
			assert.Contains(t, res.Text, "MARK-k8s-"+agent)
			conv := res.Conversation
			require.NotEmpty(t, conv)

			res, err = r.Run(ctx, outpost.Turn{Agent: agent, Prompt: "[[outpost:scenario=tool]] MARK-kt-" + agent})
			require.NoError(t, err, "%+v", res)
			got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-kt-"+agent+".txt"))
			require.NoError(t, err, "the file the agent wrote in the pod is in the workspace")
			assert.Contains(t, string(got), "MARK-kt-"+agent)

			res, err = r.Run(ctx, outpost.Turn{Agent: agent, Prompt: "again MARK-kr-" + agent, Continue: conv})
			require.NoError(t, err, "resume in a new pod: %+v", res)
			assert.Equal(t, conv, res.Conversation)
			if agent != "copilot" { // Copilot CLI cannot fork a session
				res, err = r.Run(ctx, outpost.Turn{Agent: agent, Prompt: "branch MARK-kf-" + agent, Continue: conv, Fork: true})
				require.NoError(t, err, "fork in a new pod: %+v", res)
				assert.NotEqual(t, conv, res.Conversation)
			}

			res, err = r.Run(ctx, outpost.Turn{Agent: agent, Prompt: "[[outpost:scenario=quota]] MARK-kq-" + agent})
			require.Error(t, err)
			assert.True(t, outposterr.IsQuota(err), "%v", err)
			if at, ok := outposterr.ResetAt(err); ok {
				assert.WithinDuration(t, reset, at, time.Minute)
			} else if agent != "copilot" {
				t.Errorf("no reset time: %v", err)
			}
			_ = res

			cctx, cancel := context.WithCancel(ctx)
			go func() { time.Sleep(8 * time.Second); cancel() }()
			_, err = r.Run(cctx, outpost.Turn{Agent: agent, Prompt: "[[outpost:scenario=hang]] MARK-kc-" + agent})
			require.Error(t, err)
			assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err), "%v", err)
			assert.Empty(t, kubeLeft(t, cs, os.Getpid()), "a cancelled turn leaves no pod")
		})
	}
	assert.Empty(t, kubeLeft(t, cs, os.Getpid()))
}

// TestKubernetesCommand: outpost run --sandbox kubernetes, SIGINT mid-turn
// (pod and Secret gone), kill -9 (outpost gc --sandbox kubernetes removes
// them at once), and a batch of 32 jobs at concurrency 16 (each recorded once,
// nothing left).
func TestKubernetesCommand(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	cs := kubeClient(t, kc)
	bin := buildOutpost(t)
	dir := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".outpost", "drivers"), 0o755))
	// A driver whose binary the image has: no CLI to copy into 32 pods.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".outpost", "drivers", "echo.json"), []byte(`{"id":"echo","binary":"sh",
		"args":["-c","read -r p; case $p in hang*) sleep 600;; esac; echo answer: $p; echo secret=$E2E_KUBE_SECRET >&2"],
		"stdin":"${input.prompt}","env":{"E2E_KUBE_SECRET":"${secrets.E2E_KUBE_SECRET}"},"secrets":["E2E_KUBE_SECRET"],
		"output":{"mode":"text"}}`), 0o644))
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "OUTPOST_STATE_DIR="+t.TempDir(), "E2E_KUBE_SECRET=MARK-k8s-secret")
		return cmd
	}

	out, err := run("run", "--agent", "echo", "--sandbox", "kubernetes", "--env", "E2E_KUBE_SECRET", "--no-store", "--json", "hello MARK-kcli").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "answer: hello MARK-kcli")

	// SIGINT mid-turn: exit 130, the pod and its Secret gone.
	cmd := run("run", "--agent", "echo", "--sandbox", "kubernetes", "--env", "E2E_KUBE_SECRET", "--no-store", "hang MARK-kint")
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(kubeLeft(t, cs, cmd.Process.Pid)) > 0 }, time.Minute, 200*time.Millisecond)
	time.Sleep(2 * time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 130, ee.ExitCode())
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "SIGINT leaves no pod and no Secret")

	// kill -9: gc removes the pod and Secret (the cluster would too,
	// after the runner job's grace: TestKubernetesLeaseDiesWithRunner).
	cmd = run("run", "--agent", "echo", "--sandbox", "kubernetes", "--env", "E2E_KUBE_SECRET", "--no-store", "hang MARK-kkill")
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(kubeLeft(t, cs, cmd.Process.Pid)) >= 2 }, time.Minute, 200*time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	left := kubeLeft(t, cs, cmd.Process.Pid)
	assert.NotEmpty(t, left)
	out, err = run("gc", "--sandbox", "kubernetes", "--dry-run").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "left over pod")
	out, err = run("gc", "--sandbox", "kubernetes").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Eventually(t, func() bool { return len(kubeLeft(t, cs, cmd.Process.Pid)) == 0 }, time.Minute, 500*time.Millisecond,
		"gc removed %v", left)

	// A batch across the cluster.
	var jobs strings.Builder
	for i := range 32 {
		fmt.Fprintf(&jobs, `{"id":"j%02d","agent":"echo","prompt":"job %d MARK-kb"}`+"\n", i, i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "jobs.jsonl"), []byte(jobs.String()), 0o644))
	results := filepath.Join(t.TempDir(), "results.jsonl")
	bcmd := run("batch", "jobs.jsonl", "--results", results, "--sandbox", "kubernetes", "--concurrency", "16",
		"--env", "E2E_KUBE_SECRET", "--no-store")
	out, err = bcmd.CombinedOutput()
	require.NoError(t, err, string(out))
	seen := map[string]int{}
	for _, r := range readRecords(t, results) {
		seen[r.Job]++
		assert.True(t, r.Outcome.OK, "%+v", r)
	}
	assert.Len(t, seen, 32)
	for j, n := range seen {
		assert.Equal(t, 1, n, "job %s recorded once", j)
	}
	assert.Empty(t, kubeLeft(t, cs, bcmd.Process.Pid), "the batch leaves no pod or Secret")
	assert.NotContains(t, string(out), "MARK-k8s-secret")
	var rec batch.Record
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(mustRead(t, results), "\n", 2)[0]), &rec))
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// bakedGatewayImage builds an image FROM the sandbox image with the
// outpost executable self baked in (outpost image build --with-gateway, run
// by self) and imports it into the test cluster (scripts/kube-setup.sh with
// OUTPOST_KUBE_IMAGES, which reuses the running cluster). The tag is fixed,
// so each run replaces the last one's image in the cluster.
func bakedGatewayImage(t testing.TB, self string) string {
	t.Helper()
	const tag = "outpost/e2e-gateway:baked"
	out, err := exec.Command(self, "image", "build", "--with-gateway", "--tag", tag).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag).Run() })
	cmd := exec.Command("bash", "../scripts/kube-setup.sh")
	cmd.Env = append(os.Environ(), "OUTPOST_KUBE_IMAGES="+tag)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "import %s into the cluster: %s", tag, out)
	return tag
}

// TestKubernetesGateway: an API key stays out of the pod, in the model
// gateway, whichever runs it: the runner's own gateway for a pod on the
// host's network (a one-node cluster on this machine), or a gateway
// sidecar in the pod (the outpost executable copied into a second
// container, or run from the image when the image bakes this very
// executable in — outpost image build --with-gateway — its grant sent over
// its standard input; what a pod on any cluster uses). The real Claude Code in the pod reaches the scripted
// server only through the gateway, which puts the real key on every
// request; the key is in no pod spec and no Secret while the turn runs, and
// the gateway's usage completes the result.
func TestKubernetesGateway(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	self := buildOutpost(t)
	for _, c := range []struct {
		name, binary string
		containers   int
		baked        bool
	}{{"runner", "", 1, false}, {"sidecar", self, 2, false}, {"baked sidecar", self, 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			var image string
			if c.baked {
				image = bakedGatewayImage(t, self)
			}
			ctx := context.Background()
			marker := "sk-ant-api03-MARK-k8s-gateway-51b2-" + strings.ReplaceAll(c.name, " ", "-")
			srv, err := outposttest.NewServer()
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			vars := map[string]string{"ANTHROPIC_API_KEY": marker, "ANTHROPIC_BASE_URL": srv.URL(), "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
			ws := workspace(t)
			r, err := outpost.New(ctx, outpost.Options{Project: ws, NoStore: true, Auth: credentials.Auth{Form: credentials.Usage},
				Forward: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
				Getenv:  func(k string) string { return vars[k] },
				Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}, Common: sandbox.Common{Network: "host", Image: image}, GatewayBinary: c.binary}})
			require.NoError(t, err)
			t.Cleanup(r.Close)

			var sampled bool
			var sidecarRuns string
			var leaks []string
			containers := 0
			res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "say MARK-kgw", OnEvent: func(ev adapters.Event) {
				if sampled {
					return
				}
				sampled = true
				sel := kubernetes.LabelOwnerPID + "=" + strconv.Itoa(os.Getpid())
				pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: sel})
				require.NoError(t, err)
				secrets, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: sel})
				require.NoError(t, err)
				require.Len(t, pods.Items, 1, "the turn's pod is listed")
				pod := pods.Items[0]
				containers = len(pod.Spec.Containers)
				// Everything the lease can read while the CLI works:
				// every environment and command line it sees, the
				// roots of the pod's other processes, its own files.
				seen := kubeExec(t, kc, pod.Namespace, pod.Name, "lease", `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null
cat /proc/[0-9]*/root/outpost-sidecar/* 2>/dev/null | head -c 1000000
find /home /workspace /tmp -type f -size -4M -exec cat {} + 2>/dev/null
true`)
				if !strings.Contains(seen, "claude") {
					leaks = append(leaks, "the sample saw no CLI process: "+seen[:min(len(seen), 200)])
				}
				if strings.Contains(seen, marker) {
					leaks = append(leaks, "inside the lease")
				}
				if c.binary != "" {
					// Which gateway the sidecar container runs: the
					// copied program, or the image's.
					sidecarRuns = kubeExec(t, kc, pod.Namespace, pod.Name, "sidecar",
						`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f"; echo; done; ls /outpost-sidecar | sed 's/^/ls:/'`)
				}
				b, _ := json.Marshal(pods.Items)
				if strings.Contains(string(b), marker) {
					leaks = append(leaks, "pod spec")
				}
				for _, s := range secrets.Items {
					for k, v := range s.Data {
						if strings.Contains(string(v), marker) {
							leaks = append(leaks, "secret "+s.Name+" "+k)
						}
					}
				}
			}})
			require.NoError(t, err, "%+v", res)
			assert.Contains(t, res.Text, "MARK-kgw")
			assert.True(t, sampled)
			assert.Equal(t, c.containers, containers, "containers of the pod")
			if c.baked {
				assert.Contains(t, sidecarRuns, sandbox.BakedGateway+" gateway sidecar", "the image's gateway runs")
				assert.NotContains(t, sidecarRuns, "ls:program", "nothing was copied")
			} else if c.binary != "" {
				assert.Contains(t, sidecarRuns, "/outpost-sidecar/program gateway sidecar", "the copied gateway runs")
			}
			assert.Empty(t, leaks, "the key reached the pod")
			reqs := srv.ModelRequests()
			require.NotEmpty(t, reqs)
			for _, q := range reqs {
				assert.Equal(t, outposttest.KeyFingerprint(marker), q.KeyFingerprint, "%s %s carried the real key", q.Method, q.Path)
			}
			assert.True(t, res.Usage.Complete)
			out, _ := json.Marshal(res)
			assert.NotContains(t, string(out), marker, "the result")

			// A cost cap holds in the pod's gateway too: the request
			// after the one that crossed it is refused there, and the
			// turn ends as budget with the gateway's usage of record.
			before := len(srv.ModelRequests())
			res, err = r.Run(ctx, outpost.Turn{Agent: "claude",
				Prompt: "write MARK-kcap " + outposttest.Directive(outposttest.ScenarioTool),
				Limits: harness.Limits{MaxCostUSD: 1e-6}})
			require.Error(t, err, "%+v", res)
			assert.Equal(t, "cost", outposterr.BudgetReason(err), "%v", err)
			assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
			assert.Equal(t, 1, len(srv.ModelRequests())-before, "the upstream answered only the request that crossed the cap")
			assert.Equal(t, "gateway", res.UsageSource)
			assert.Empty(t, kubeLeft(t, cs, os.Getpid()))
		})
	}
}

// TestKubernetesGatewaySidecarFails: a gateway sidecar that cannot start
// (here a program that is not outpost) fails the turn as a sandbox error
// that quotes what the program said, and leaves no pod behind.
func TestKubernetesGatewaySidecarFails(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	bad := filepath.Join(t.TempDir(), "not-outpost")
	require.NoError(t, os.WriteFile(bad, []byte("#!/bin/sh\necho 'MARK-sidecar cannot run here' >&2\nexit 3\n"), 0o755))
	ctx := context.Background()
	srv, err := outposttest.NewServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	vars := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-api03-MARK-bad-sidecar", "ANTHROPIC_BASE_URL": srv.URL(), "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	r, err := outpost.New(ctx, outpost.Options{Project: workspace(t), NoStore: true, Auth: credentials.Auth{Form: credentials.Usage},
		Forward: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
		Getenv:  func(k string) string { return vars[k] },
		Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}, Common: sandbox.Common{Network: "host"}, GatewayBinary: bad}})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	_, err = r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "say MARK-never"})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)
	assert.Contains(t, err.Error(), "gateway sidecar")
	assert.Contains(t, err.Error(), "MARK-sidecar cannot run here")
	assert.NotContains(t, err.Error(), "sk-ant-api03-MARK-bad-sidecar")
	assert.Empty(t, srv.ModelRequests(), "no request left the pod")
	assert.Empty(t, kubeLeft(t, cs, os.Getpid()))
}

// BenchmarkKubernetesGateway times a Claude Code turn with an API key in a
// pod on the host's network through the runner's own gateway against one
// through a gateway sidecar in the pod (the outpost executable copied into
// a second container and started there), and one through a sidecar that
// runs the outpost baked into the pod's image (outpost image build
// --with-gateway, imported into the cluster): what the sidecar costs per
// pod. The cases are interleaved within each iteration, in rotating order,
// so that a burst of other load on this shared machine hits them alike;
// each case's median is reported, with the ratios of medians.
func BenchmarkKubernetesGateway(b *testing.B) {
	kc := testenv.Kubeconfig(b)
	testenv.CLI(b, "claude")
	self := filepath.Join(b.TempDir(), "outpost")
	out, err := exec.Command("go", "build", "-o", self, "../cmd/outpost").CombinedOutput()
	require.NoError(b, err, string(out))
	ctx := context.Background()
	srv, err := outposttest.NewServer()
	require.NoError(b, err)
	defer srv.Close()
	vars := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-api03-bench", "ANTHROPIC_BASE_URL": srv.URL(), "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	baked := bakedGatewayImage(b, self)
	cases := []struct{ name, binary, image string }{{"runner", "", ""}, {"sidecar", self, ""}, {"sidecar-baked", self, baked}}
	runners := make([]*outpost.Runner, len(cases))
	for i, c := range cases {
		ws := b.TempDir()
		require.NoError(b, os.Chmod(ws, 0o777))
		r, err := outpost.New(ctx, outpost.Options{Project: ws, NoStore: true, Auth: credentials.Auth{Form: credentials.Usage},
			Forward: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
			Getenv:  func(k string) string { return vars[k] },
			Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}, Common: sandbox.Common{Network: "host", Image: c.image}, GatewayBinary: c.binary}})
		require.NoError(b, err)
		defer r.Close()
		runners[i] = r
	}
	took := make([][]time.Duration, len(cases))
	for i := 0; b.Loop(); i++ {
		for k := range cases {
			c := (i + k) % len(cases)
			took[c] = append(took[c], timed(func() {
				res, err := runners[c].Run(ctx, outpost.Turn{Agent: "claude", Prompt: "say MARK-kgb"})
				require.NoError(b, err, "%+v", res)
			}))
		}
	}
	for c, k := range cases {
		b.ReportMetric(median(took[c]), k.name+"-ms")
	}
	b.ReportMetric(median(took[1])/median(took[0]), "sidecar/runner")
	b.ReportMetric(median(took[2])/median(took[0]), "sidecar-baked/runner")
	// The median of each iteration's own ratio: the turns compared ran
	// next to each other, so a drift of the load between iterations
	// cancels out.
	b.ReportMetric(pairedRatio(took[1], took[0]), "sidecar/runner-paired")
	b.ReportMetric(pairedRatio(took[2], took[0]), "sidecar-baked/runner-paired")
}

// pairedRatio is the median over iterations of a[i]/b[i].
func pairedRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	sort.Float64s(r)
	return r[len(r)/2]
}

// BenchmarkKubernetesDelivery times a cold offline Copilot turn in a pod
// whose CLI is copied in (the sandbox image) against one whose image bakes
// it in (outpost image build --with copilot, imported into the cluster:
// OUTPOST_KUBE_IMAGES="outpost/base:dev outpost/base:dev-clis"
// scripts/kube-setup.sh). The baked case is skipped when the cluster's node
// lacks the image.
func BenchmarkKubernetesDelivery(b *testing.B) {
	kc := testenv.Kubeconfig(b)
	testenv.CLI(b, "copilot")
	ctx := context.Background()
	for _, c := range []struct{ name, image string }{{"copy", ""}, {"baked", "outpost/base:dev-clis"}} {
		b.Run(c.name, func(b *testing.B) {
			if c.image != "" {
				p, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: kc})
				require.NoError(b, err)
				ok, err := p.ImageOnNode(ctx, c.image)
				_ = p.Close()
				if err != nil || !ok {
					b.Skipf("the cluster's node has no %s (build it with outpost image build --with copilot and import it)", c.image)
				}
			}
			ws := b.TempDir()
			require.NoError(b, os.Chmod(ws, 0o777))
			r, err := outpost.New(ctx, outpost.Options{Project: ws, Offline: true, NoStore: true, Getenv: os.Getenv,
				Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}, Common: sandbox.Common{Image: c.image}}})
			require.NoError(b, err)
			defer r.Close()
			for b.Loop() {
				res, err := r.Run(ctx, outpost.Turn{Agent: "copilot", Prompt: "say MARK-kd"})
				require.NoError(b, err, "%+v", res)
			}
		})
	}
}

// floodScript is what a hostile agent runs in its lease: large requests
// straight to the model gateway with the lease's placeholder key, one
// after another and whatever the answers, far more than a turn's deadline
// allows — bash's /dev/tcp needs nothing the image lacks.
const floodScript = `body='{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"'"$(head -c 200000 /dev/zero | tr '\0' x)"'"}]}'
hp=${ANTHROPIC_BASE_URL#http://}; hp=${hp%%/*}
if [ -n "$ANTHROPIC_API_KEY" ]; then auth="x-api-key: $ANTHROPIC_API_KEY"; else auth="authorization: Bearer $CLAUDE_CODE_OAUTH_TOKEN"; fi
for i in $(seq 1 100000); do
  exec 3<>"/dev/tcp/${hp%%:*}/${hp##*:}" || continue
  printf 'POST /v1/messages HTTP/1.1\r\nhost: %s\r\n%s\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s' "$hp" "$auth" "${#body}" "$body" >&3
  read -r status <&3; echo "flood $i: $status"
  exec 3<&-
done
echo flood done`

// TestKubernetesGatewayBudgetHolds: code in a pod's lease that bypasses
// its CLI and floods the gateway sidecar with large requests meets the
// turn's cost cap there: the upstream answers only until the spend
// crosses the cap (one request at a time), the next request is refused,
// and the turn ends as budget "cost" at once — not at its deadline — with
// the gateway's measurement as its usage.
func TestKubernetesGatewayBudgetHolds(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	self := buildOutpost(t)
	ctx := context.Background()
	marker := "sk-ant-api03-MARK-k8s-flood-7c1d"
	srv, err := outposttest.NewServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	vars := map[string]string{"ANTHROPIC_API_KEY": marker, "ANTHROPIC_BASE_URL": srv.URL(), "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	ws := workspace(t)
	r, err := outpost.New(ctx, outpost.Options{Project: ws, NoStore: true, Auth: credentials.Auth{Form: credentials.Usage},
		Forward: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
		Getenv:  func(k string) string { return vars[k] },
		Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc}, Common: sandbox.Common{Network: "host"}, GatewayBinary: self}})
	require.NoError(t, err)
	t.Cleanup(r.Close)

	const capUSD = 0.6 // the CLI's own first request (about $0.33), then a few of the flood's ($0.15 each)
	res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "MARK-kflood " + outposttest.RunDirective(floodScript),
		Limits: harness.Limits{MaxCostUSD: capUSD, Deadline: 10 * time.Minute}})
	require.Error(t, err, "%+v", res)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
	assert.Equal(t, "cost", outposterr.BudgetReason(err), "%v", err)
	var reqs []outposttest.Request
	for _, q := range srv.Requests() {
		if q.Path == "/v1/messages" {
			reqs = append(reqs, q)
		}
	}
	assert.GreaterOrEqual(t, len(reqs), 3, "the CLI's request and the flood's reached the upstream through the gateway (%+v)", res.Usage)
	assert.Less(t, len(reqs), 20, "the upstream saw the cap's worth, not the flood")
	for _, q := range reqs {
		assert.Equal(t, outposttest.KeyFingerprint(marker), q.KeyFingerprint, "the gateway put the real key on %s", q.Path)
	}
	assert.Equal(t, "gateway", res.UsageSource)
	require.True(t, res.Usage.CostKnown)
	assert.GreaterOrEqual(t, res.Usage.CostUSD, capUSD)
	assert.Less(t, res.Usage.CostUSD, capUSD+0.5, "overshoot: the request in flight at most")
	out, _ := json.Marshal(res)
	assert.NotContains(t, string(out), marker)
	assert.Empty(t, kubeLeft(t, cs, os.Getpid()))
}
