package bootstrap

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// The real CLIs are downloaded once per test binary run into one cache that
// every test and benchmark shares; TestMain removes it.
var real struct {
	mu      sync.Mutex
	dir     string
	b       *Bootstrapper
	entries map[string]*Entry
}

func TestMain(m *testing.M) {
	code := m.Run()
	if real.dir != "" {
		_ = os.RemoveAll(real.dir)
	}
	os.Exit(code)
}

// realRegistry resolves the registry from the user's npm configuration and
// probes it with a real request, or skips (fails with OUTPOST_REQUIRE_CLIS=1).
func realRegistry(tb testing.TB) Registry {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	reg, err := NPMConfig{Getenv: os.Getenv, Dir: wd, Home: home, RunNPM: NPMCommand(ctx, "npm")}.Resolve()
	if err != nil {
		testenv.Missing(tb, testenv.RequireCLIsEnv, "npm registry ("+err.Error()+")")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, reg.URL, nil)
	require.NoError(tb, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		testenv.Missing(tb, testenv.RequireCLIsEnv, "npm registry ("+err.Error()+")")
		return reg
	}
	resp.Body.Close()
	return reg
}

// realEntries bootstraps the named CLIs from the real registry (in
// parallel, once per run) and returns their cache entries.
func realEntries(tb testing.TB, names ...string) (*Bootstrapper, map[string]*Entry) {
	tb.Helper()
	testenv.Short(tb)
	if HostPlatform() != LinuxX64 && HostPlatform() != LinuxARM64 {
		tb.Skipf("no pinned CLIs for %s", HostPlatform())
	}
	reg := realRegistry(tb)
	real.mu.Lock()
	defer real.mu.Unlock()
	if real.b == nil {
		dir, err := os.MkdirTemp("", "outpost-bootstrap-real-")
		require.NoError(tb, err)
		real.dir = dir
		real.b, err = New(Options{CacheDir: dir, Registry: func() (Registry, error) { return reg, nil }})
		require.NoError(tb, err)
		real.entries = map[string]*Entry{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	for _, name := range names {
		if real.entries[name] != nil {
			continue
		}
		wg.Go(func() {
			start := time.Now()
			e, err := real.b.Ensure(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			errs[name] = err
			if err == nil {
				real.entries[name] = e
				tb.Logf("bootstrapped %s %s in %s (%d bytes from %s)", name, e.Version, time.Since(start).Round(time.Millisecond), e.Manifest.Size, e.Manifest.Source)
			}
		})
	}
	wg.Wait()
	for name, err := range errs {
		require.NoError(tb, err, name)
	}
	out := map[string]*Entry{}
	for _, name := range names {
		out[name] = real.entries[name]
	}
	return real.b, out
}

// dockerProvider returns a provider on the local engine with the base
// image, or skips (fails with OUTPOST_REQUIRE_DOCKER=1).
func dockerProvider(tb testing.TB) *docker.Provider {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := docker.New(ctx, docker.Options{Network: "host", Version: "test"})
	if err != nil {
		testenv.Missing(tb, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	tb.Cleanup(func() {
		assert.NoError(tb, p.ReleaseAll(context.Background()))
		_ = p.Close()
	})
	if _, err := p.Client().ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Missing(tb, testenv.RequireDockerEnv, "image "+docker.DefaultImage+" (run scripts/docker-setup.sh)")
	}
	return p
}

const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestRealCLIs bootstraps Claude Code, Codex and Copilot for real from the
// registry in the user's npm configuration, then runs each inside a Docker
// lease from the read-only cache mount, and Copilot also from a copy.
func TestRealCLIs(t *testing.T) {
	names := []string{"claude", "codex", "copilot"}
	b, entries := realEntries(t, names...)
	ctx := context.Background()

	t.Run("cache", func(t *testing.T) {
		for _, name := range names {
			e := entries[name]
			r, _ := b.Catalog().Row(name)
			assert.Equal(t, r.Sources[b.Platform()].Integrity, e.Manifest.Integrity)
			fi, err := os.Stat(e.BinPath)
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular())
			assert.Greater(t, fi.Size(), int64(1<<20), name)
			// A second Ensure is a cache hit and offline.
			b2, err := New(Options{CacheDir: real.dir, Offline: true})
			require.NoError(t, err)
			e2, err := b2.Ensure(ctx, name)
			require.NoError(t, err)
			assert.Equal(t, e.BinPath, e2.BinPath)
			t.Logf("%s: %s (%d files)", name, e.Bin, len(e.Manifest.Files))
		}
		codex := entries["codex"]
		for _, helper := range []string{"bin/codex-code-mode-host", "codex-path/rg", "codex-resources/bwrap"} {
			assert.FileExists(t, codex.Dir+"/"+helper)
		}
	})

	t.Run("host", func(t *testing.T) {
		sb := hostSandbox(t)
		for _, name := range names {
			line, err := b.Check(ctx, sb, name, entries[name].BinPath)
			require.NoError(t, err, name)
			t.Logf("host %s --version: %s", name, line)
		}
	})

	t.Run("docker mount", func(t *testing.T) {
		p := dockerProvider(t)
		spec := sandbox.Spec{Env: map[string]string{}}
		var dirs []string
		for _, name := range names {
			spec.Mounts = append(spec.Mounts, entries[name].Mount())
			dirs = append(dirs, entries[name].SandboxBinDir())
		}
		spec.Env["PATH"] = strings.Join(dirs, ":") + ":" + basePath
		sb, err := p.Acquire(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
		for _, name := range names {
			line, err := b.Check(ctx, sb, name, entries[name].SandboxBin())
			require.NoError(t, err, name)
			t.Logf("docker %s --version: %s", name, line)
			// Found by name on the PATH, too.
			line2, err := b.Check(ctx, sb, name, entries[name].Command)
			require.NoError(t, err, name)
			assert.Equal(t, line, line2)
		}
		line, err := b.Check(ctx, sb, "claude", "claude")
		require.NoError(t, err)
		assert.Equal(t, "2.1.328 (Claude Code)", line)
		plat, err := DetectPlatform(ctx, sb)
		require.NoError(t, err)
		assert.Equal(t, b.Platform(), plat, "the base image is glibc on the host's architecture")
	})

	t.Run("docker copy", func(t *testing.T) {
		p := dockerProvider(t)
		sb, err := p.Acquire(ctx, sandbox.Spec{})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
		bin, err := b.Install(ctx, sb, entries["copilot"], "")
		require.NoError(t, err)
		assert.Equal(t, docker.Home+"/.outpost/cli/copilot/1.0.102/copilot", bin)
		line, err := b.Check(ctx, sb, "copilot", bin)
		require.NoError(t, err)
		assert.Equal(t, "GitHub Copilot CLI 1.0.102.", line)
	})
}
