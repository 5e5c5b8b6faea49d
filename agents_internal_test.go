package outpost

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/agents/agenttest"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

// TestTestOnlyAgentFromOneRow: an agent declared by one adapter folder and
// one registry row (package agenttest's parrot) gets gateway routing, its
// reserved relocation variable and its bootstrap pin from the runner,
// without an edit to this package.
func TestTestOnlyAgentFromOneRow(t *testing.T) {
	ctx := context.Background()
	reg := agenttest.Registry()
	var mu sync.Mutex
	var asked []string
	npm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.URL.Path)
		http.NotFound(w, req)
	}))
	defer npm.Close()
	env := map[string]string{RegistryEnv: npm.URL + "/", CacheEnv: t.TempDir()}
	newRunner := func(project string, mcp ...credentials.MCPServer) (*Runner, error) {
		return New(ctx, Options{Project: project, NoStore: true, Agents: reg, MCP: mcp,
			Sandbox: SandboxOptions{Kind: "host"}, Getenv: func(k string) string { return env[k] }})
	}
	r, err := newRunner(t.TempDir())
	require.NoError(t, err)
	defer r.Close()

	assert.Contains(t, r.upstreams(), agenttest.Upstream, "the gateway forwards to the parrot's API")

	err = r.CheckJobs([]batch.Job{{ID: "j", Agent: agenttest.Name, Prompt: "hi", Env: []string{agenttest.HomeVar}}})
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), agenttest.HomeVar+" is reserved", "a job may not forward the parrot's relocation variable")

	_, err = newRunner(t.TempDir(), credentials.MCPServer{Name: "fs", Command: "srv", Env: map[string]string{agenttest.HomeVar: "x"}})
	assert.ErrorContains(t, err, "env "+agenttest.HomeVar+" is reserved", "nor an MCP server's env")

	declares := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(declares, ConfigDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(declares, EnvFile), []byte(agenttest.HomeVar+"=x\n"), 0o600))
	_, err = newRunner(declares)
	assert.ErrorContains(t, err, agenttest.HomeVar+" is reserved", "nor a project declare it")

	row, err := r.table.Lookup(agenttest.Name)
	require.NoError(t, err)
	_, err = r.ensureCLI(ctx, row)
	require.Error(t, err, "the registry serves nothing")
	assert.Equal(t, outposterr.Bootstrap, outposterr.ClassOf(err))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, asked, "the pin was looked for: %v", err)
	assert.Contains(t, asked[0], agenttest.Launcher, "the runner's catalog holds the parrot's pin")
}

// TestCheckJobsUnbuiltEnvironment: the runner builds no image, so a job
// whose environment was not built (its tag given as image) is refused
// rather than run on the default image.
func TestCheckJobsUnbuiltEnvironment(t *testing.T) {
	env := map[string]string{CacheEnv: t.TempDir()}
	r, err := New(context.Background(), Options{Project: t.TempDir(), NoStore: true, Agents: agenttest.Registry(),
		Sandbox: SandboxOptions{Kind: "host"}, Getenv: func(k string) string { return env[k] }})
	require.NoError(t, err)
	defer r.Close()
	err = r.CheckJobs([]batch.Job{{ID: "j", Agent: agenttest.Name, Prompt: "hi", Environment: &batch.EnvironmentSpec{Context: "/t/env"}}})
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "job j: its environment is not built")
	require.NoError(t, r.CheckJobs([]batch.Job{{ID: "j", Agent: agenttest.Name, Prompt: "hi", Image: "outpost-task:x"}}))
}

// TestCLIInstallHoldsUpNoOtherAgent: while one agent's CLI is being
// installed (its registry answers slowly), another agent's turn gets its
// lease, a second turn of the installing agent waits for the same
// installation instead of starting its own, and a third one stopped while
// it waits returns at once without ending the installation.
func TestCLIInstallHoldsUpNoOtherAgent(t *testing.T) {
	ctx := context.Background()
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	asked := 0
	npm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		once.Do(func() {
			close(arrived)
			<-release
		})
		mu.Lock()
		asked++
		mu.Unlock()
		http.NotFound(w, req)
	}))
	defer npm.Close()
	project := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(project, ConfigDir, "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(project, ConfigDir, "drivers", "echo.json"),
		[]byte(`{"id":"echo","binary":"sh","args":["-c","echo hi"],"output":{"mode":"text"}}`), 0o644))
	env := map[string]string{RegistryEnv: npm.URL + "/", CacheEnv: t.TempDir()}
	r, err := New(ctx, Options{Project: project, NoStore: true, Agents: agenttest.Registry(),
		Sandbox: SandboxOptions{Kind: "host"}, Getenv: func(k string) string { return env[k] }})
	require.NoError(t, err)
	defer r.Close()
	parrot, err := r.table.Lookup(agenttest.Name)
	require.NoError(t, err)
	echo, err := r.table.Lookup("echo")
	require.NoError(t, err)

	errs := make(chan error, 2)
	go func() { _, _, _, err := r.lease(ctx, parrot, project); errs <- err }()
	select {
	case <-arrived: // the first installation is under way, and stays there
	case err := <-errs:
		t.Fatalf("the installation ended before it asked the registry: %v", err)
	}
	go func() { _, err := r.ensureCLI(ctx, parrot); errs <- err }()

	// A turn stopped while it waits returns at once; the installation
	// goes on for the others.
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { _, err := r.ensureCLI(cctx, parrot); stopped <- err }()
	cancel()
	err = <-stopped
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, outposterr.Bootstrap, outposterr.ClassOf(err))

	got := make(chan error, 1)
	go func() { _, _, _, err := r.lease(ctx, echo, project); got <- err }()
	select {
	case err := <-got:
		require.NoError(t, err, "the other agent's lease")
		assert.Zero(t, len(errs), "the other agent's lease came while the installation still ran (the stopped turn ended neither it nor its waiters)")
	case <-time.After(time.Minute): // a guard against a deadlock, not a measurement
		close(release)
		t.Fatal("the other agent's turn waited for the installation")
	}
	close(release)
	for range 2 {
		err := <-errs
		require.Error(t, err, "the registry serves nothing")
		assert.Equal(t, outposterr.Bootstrap, outposterr.ClassOf(err))
	}
	mu.Lock()
	first := asked
	mu.Unlock()
	_, err = r.ensureCLI(ctx, parrot)
	require.Error(t, err, "a failed installation is not kept: it is tried again")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, first, asked-first, "the two waiting turns made one installation's requests")
}
