package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// claudeEntry bootstraps the pinned Claude Code into the user's Outpost
// cache (a cache hit when outpost bootstrap or an earlier test ran), from
// the registry of the user's npm configuration.
func claudeEntry(t *testing.T) (*bootstrap.Bootstrapper, *bootstrap.Entry) {
	t.Helper()
	testenv.CLI(t, "claude") // the real CLIs are wanted on this machine
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cache := os.Getenv("OUTPOST_CACHE_DIR")
	if cache == "" {
		dir, err := os.UserCacheDir()
		require.NoError(t, err)
		cache = filepath.Join(dir, "outpost")
	}
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	reg := bootstrap.NPMConfig{Getenv: os.Getenv, Dir: wd, Home: home, RunNPM: bootstrap.NPMCommand(ctx, "npm")}
	b, err := bootstrap.New(bootstrap.Options{CacheDir: cache, Registry: reg.Resolve})
	require.NoError(t, err)
	e, err := b.Ensure(ctx, "claude")
	if err != nil {
		testenv.Missing(t, testenv.RequireCLIsEnv, "the pinned Claude Code in the Outpost cache ("+err.Error()+")")
	}
	return b, e
}

// otherEngine opens a provider on an engine of scripts/engines-setup.sh
// whose leases share this machine's network (the scripted server listens
// on 127.0.0.1), and checks at the end that no container of its run is
// left on that engine.
func otherEngine(t *testing.T, opts docker.Options, need, what string) *docker.Provider {
	t.Helper()
	opts.Network = "host"
	opts.RunID = "e2e-engines-" + uuid.NewString()
	opts.Version = "test"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := docker.New(ctx, opts)
	if err != nil {
		testenv.Missing(t, need, what+" ("+err.Error()+")")
	}
	if _, err := p.Client().ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Missing(t, need, "image "+docker.DefaultImage+" in the "+what+" (run scripts/engines-setup.sh)")
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		cs, err := p.Client().ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", docker.LabelRun+"="+opts.RunID))})
		assert.NoError(t, err)
		assert.Empty(t, cs, "containers left on the %s", what)
		_ = p.Close()
	})
	return p
}

// TestClaudeOnOtherEngines runs real Claude Code turns against the
// scripted server in a lease of Podman's API service and in a lease of the
// Docker engine reached over ssh (a remote engine: nothing of this machine
// is mounted). On both the verified CLI is copied into the lease
// (bootstrap.CopyInProvider) and the workspace starts empty in the lease.
func TestClaudeOnOtherEngines(t *testing.T) {
	testenv.Short(t)
	engines := map[string]func(t *testing.T) *docker.Provider{
		"podman": func(t *testing.T) *docker.Provider {
			p := otherEngine(t, docker.Options{Host: testenv.PodmanHost()}, testenv.RequirePodmanEnv, "Podman API service")
			require.Equal(t, "podman", p.Engine())
			return p
		},
		"ssh": func(t *testing.T) *docker.Provider {
			host, flags := testenv.SSHEngine(t)
			p := otherEngine(t, docker.Options{Host: host, SSHFlags: flags}, testenv.RequireRemoteEnginesEnv, "ssh:// Docker engine")
			require.False(t, p.Local())
			return p
		},
	}
	b, entry := claudeEntry(t)
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			p := open(t)
			prov := b.CopyInProvider(p, entry, "/usr/local/bin:/usr/bin:/bin", "")
			ctx := context.Background()
			sb, err := prov.Acquire(ctx, sandbox.Spec{})
			require.NoError(t, err)
			defer func() { assert.NoError(t, sb.Release(context.Background())) }()

			srv := server(t)
			res, err := turn(t, sb, srv, adapters.Input{Prompt: "say MARK-eng-" + name}, false)
			require.NoError(t, err, "stderr: %s", resTail(res))
			assert.Contains(t, res.Text, "MARK-eng-"+name)
			assert.Equal(t, claude.Version, res.CLIVersion, "the copied-in CLI ran")
			assert.NotEmpty(t, res.Conversation)

			// A tool turn writes into the lease's workspace; resume sees turn 1.
			tsrv := server(t, outposttest.WithScenario(outposttest.ScenarioTool))
			res2, err := turn(t, sb, tsrv, adapters.Input{Prompt: "write MARK-engtool-" + name}, false)
			require.NoError(t, err, "stderr: %s", resTail(res2))
			file, content := outposttest.ToolFile("MARK-engtool-" + name)
			proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", file}})
			require.NoError(t, err)
			got := readAll(proc)
			st, err := proc.Wait()
			require.NoError(t, err)
			_ = proc.Close()
			require.True(t, st.Success(), "the tool wrote %s in the workspace", file)
			assert.Equal(t, content, got)

			res3, err := turn(t, sb, srv, adapters.Input{Prompt: "again MARK-eng2", Continue: res.Conversation}, false)
			require.NoError(t, err, "stderr: %s", resTail(res3))
			assert.Contains(t, res3.Text, "remembered: MARK-eng-"+name)
		})
	}
}
