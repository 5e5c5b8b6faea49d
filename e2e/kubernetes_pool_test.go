package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
)

// TestKubernetesPooledBatch: `outpost batch --sandbox kubernetes --pool
// on` runs every job and leaves no pod; a pooled batch interrupted
// (SIGINT) while its pool holds ready pods beside the running turns
// exits 130 and leaves nothing.
func TestKubernetesPooledBatch(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	cs := kubeClient(t, kc)
	bin := buildOutpost(t)
	dir := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".outpost", "drivers"), 0o755))
	// A driver whose binary the image has: no CLI to copy into the pods.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".outpost", "drivers", "echo.json"), []byte(`{"id":"echo","binary":"sh",
		"args":["-c","read -r p; case $p in hang*) sleep 600;; esac; echo answer: $p"],
		"stdin":"${input.prompt}","output":{"mode":"text"}}`), 0o644))
	jobs := func(n int, prefix string) string {
		var b strings.Builder
		for i := range n {
			line, _ := json.Marshal(batch.Job{ID: fmt.Sprintf("job-%02d", i), Agent: "echo", Prompt: fmt.Sprintf("%s MARK-kpool-%02d", prefix, i)})
			b.Write(line)
			b.WriteByte('\n')
		}
		path := filepath.Join(dir, prefix+"-jobs.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	pods := func(pid int) int {
		n := 0
		for _, s := range kubeLeft(t, cs, pid) {
			if strings.HasPrefix(s, "pod/") {
				n++
			}
		}
		return n
	}
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "OUTPOST_STATE_DIR="+t.TempDir())
		return cmd
	}

	results := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := run("batch", jobs(6, "say"), "--results", results, "--sandbox", "kubernetes", "--concurrency", "2", "--pool", "on", "--no-store")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	recs := readRecords(t, results)
	require.Len(t, recs, 6)
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "job %s: %+v", r.Job, r.Outcome)
		assert.Contains(t, r.Outcome.Text, "answer: say MARK-kpool-", "job %s", r.Job)
	}
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "a pooled batch left nothing")

	results = filepath.Join(t.TempDir(), "results.jsonl")
	cmd = run("batch", jobs(4, "hang"), "--results", results, "--sandbox", "kubernetes", "--concurrency", "2", "--pool", "on", "--no-store")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return pods(cmd.Process.Pid) >= 4 }, 3*time.Minute, 200*time.Millisecond,
		"two turns run and the pool holds two more pods")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, stderr.String())
		assert.Equal(t, 130, ee.ExitCode(), stderr.String())
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("outpost batch did not exit after SIGINT")
	}
	assert.Empty(t, kubeLeft(t, cs, cmd.Process.Pid), "the interrupted pooled batch left nothing")
}

// TestKubernetesPooledSidecar: with a pool, pods are made ahead with
// their gateway sidecar (and the CLI copied in); each turn takes a fresh
// one, its grant reaches that pod's sidecar, the real key goes only to
// the upstream, and closing the runner leaves no pod.
func TestKubernetesPooledSidecar(t *testing.T) {
	testenv.Short(t)
	kc := testenv.Kubeconfig(t)
	testenv.CLI(t, "claude")
	cs := kubeClient(t, kc)
	self := buildOutpost(t)
	ctx := context.Background()
	marker := "sk-ant-api03-MARK-k8s-pooled-sidecar-7c1e"
	srv, err := outposttest.NewServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	vars := map[string]string{"ANTHROPIC_API_KEY": marker, "ANTHROPIC_BASE_URL": srv.URL(), "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	r, err := outpost.New(ctx, outpost.Options{Project: workspace(t), NoStore: true, Auth: credentials.Auth{Form: credentials.Usage},
		Forward: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
		Getenv:  func(k string) string { return vars[k] },
		Sandbox: outpost.SandboxOptions{Kind: "kubernetes", Settings: map[string]string{"kubeconfig": kc},
			Common: sandbox.Common{Network: "host"}, GatewayBinary: self},
		Pool: outpost.PoolOptions{Size: 1}})
	require.NoError(t, err)
	defer r.Close()
	for i := range 2 {
		if i > 0 {
			require.Eventually(t, func() bool { return r.PoolStats().Created >= 2 }, 3*time.Minute, 100*time.Millisecond,
				"the pool made the next pod")
		}
		res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: fmt.Sprintf("say MARK-kpsc-%d", i)})
		require.NoError(t, err, "%+v", res)
		assert.Contains(t, res.Text, fmt.Sprintf("MARK-kpsc-%d", i))
		assert.Equal(t, "gateway", res.UsageSource, "the grant reached the pooled pod's sidecar")
	}
	assert.GreaterOrEqual(t, r.PoolStats().Warm, 1, "%+v", r.PoolStats())
	for _, q := range srv.ModelRequests() {
		assert.Equal(t, outposttest.KeyFingerprint(marker), q.KeyFingerprint, "%s %s carried the real key", q.Method, q.Path)
	}
	r.Close()
	assert.Empty(t, kubeLeft(t, cs, os.Getpid()), "closing the runner left no pod")
}
