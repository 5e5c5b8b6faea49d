package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
)

// testEngine is an engine the package's integration tests run against.
type testEngine struct {
	endpoint docker.Endpoint
	what     string // for skip messages
	require  string // the OUTPOST_REQUIRE_* variable
	setup    string // how to get it
	podman   bool
	init     string // the engine's init process in a container
}

var (
	engineMu sync.Mutex
	under    *testEngine // nil: the local Docker engine
)

func current() testEngine {
	engineMu.Lock()
	defer engineMu.Unlock()
	if under != nil {
		return *under
	}
	return testEngine{what: "Docker engine", require: testenv.RequireDockerEnv, setup: "run scripts/docker-setup.sh", init: "docker-init"}
}

// with runs the named tests against e, one sub-test each.
func with(t *testing.T, e testEngine, tests map[string]func(*testing.T)) {
	engineMu.Lock()
	under = &e
	engineMu.Unlock()
	t.Cleanup(func() {
		engineMu.Lock()
		under = nil
		engineMu.Unlock()
	})
	engine(t) // skip or fail here, once, when the engine is missing
	for name, f := range tests {
		t.Run(name, f)
	}
}

func podmanEngine() testEngine {
	return testEngine{
		endpoint: docker.Endpoint{Host: testenv.PodmanHost()},
		what:     "Podman API service at " + testenv.PodmanHost(),
		require:  testenv.RequirePodmanEnv,
		setup:    "run scripts/engines-setup.sh",
		podman:   true,
		init:     "podman-init",
	}
}

// TestPodman runs the provider's integration tests against Podman's
// Docker-compatible API service (scripts/engines-setup.sh starts it):
// the conformance suite and the checks of hardening, limits, OOM
// detection, read-only mounts, hidden directories, forwards, copies and
// cleanup. Podman sees this machine's files, so bind mounts work as with
// Docker.
func TestPodman(t *testing.T) {
	with(t, podmanEngine(), map[string]func(*testing.T){
		"Conformance":      TestConformance,
		"ExecBasics":       TestExecBasics,
		"EnvNotInConfig":   TestEnvValuesNeverInArgvOrConfig,
		"Hardening":        TestHardening,
		"ReadOnlyMounts":   TestReadOnlyMounts,
		"CopyInOut":        TestCopyInOut,
		"OOMKilled":        testPodmanOOMLeavesNoFile,
		"MissingImage":     TestMissingImage,
		"ReleaseAll":       TestReleaseAllAndCleanupOnSignal,
		"Reaper":           TestReaper,
		"HiddenDirs":       TestHiddenDirectories,
		"ForwardNoNetwork": TestForwardWithoutNetwork,
		"EngineKind":       testEngineKind("podman", true),
		"DiesWithRunner":   TestLeaseDiesWithRunner,
		"OutlivesSetup":    TestLeaseOutlivesSetup,
		"Cycles":           TestSequentialCyclesLeaveNothing,
		"ParallelLeases":   TestParallelLeases,
	})
}

// testPodmanOOMLeavesNoFile is [TestOOMKilled] on Podman, which leaves an
// empty file "oom" in its service's working directory after an OOM kill:
// scripts/engines-setup.sh starts the service in a directory of its own,
// so none lands in the checkout that ran it.
func testPodmanOOMLeavesNoFile(t *testing.T) {
	stray, err := filepath.Abs(filepath.Join("..", "..", "oom"))
	require.NoError(t, err)
	_, err = os.Lstat(stray)
	before := err == nil
	TestOOMKilled(t)
	if _, err := os.Lstat(stray); err == nil && !before {
		t.Errorf("the OOM kill left %s: the Podman service runs in this checkout (start it with scripts/engines-setup.sh)", stray)
	}
}

// TestSSHEngine runs the provider against the Docker engine reached as a
// remote engine through ssh (DOCKER_HOST=ssh://…, Docker's connection
// helper; scripts/engines-setup.sh sets up a loopback sshd). Such an
// engine is not local: leases bind nothing of this machine, the workspace
// is a fresh tmpfs, and a host workspace, mounts and forwards are refused.
func TestSSHEngine(t *testing.T) {
	host, flags := testenv.SSHEngine(t)
	e := testEngine{
		endpoint: docker.Endpoint{Host: host, SSHFlags: flags},
		what:     "ssh:// Docker engine " + host,
		require:  testenv.RequireRemoteEnginesEnv,
		setup:    "run scripts/engines-setup.sh",
		init:     "docker-init",
	}
	with(t, e, map[string]func(*testing.T){
		"Conformance": func(t *testing.T) {
			sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
				return newProvider(t, docker.Options{Host: host, SSHFlags: flags})
			}, sandboxtest.WithSpec(sandbox.Spec{Network: "host"}), sandboxtest.WithoutHostFiles())
		},
		"EngineKind":       testEngineKind("docker", false),
		"RefusesHostFiles": testRefusesHostFiles(host, flags),
		"OOMKilled":        TestOOMKilled,
		"ReleaseAll":       TestReleaseAllAndCleanupOnSignal,
		"DiesWithRunner":   TestLeaseDiesWithRunner,
	})
}

// testEngineKind checks what the provider says about its engine.
func testEngineKind(kind string, local bool) func(t *testing.T) {
	return func(t *testing.T) {
		e := current()
		p := newProvider(t, docker.Options{Host: e.endpoint.Host, TLS: e.endpoint.TLS, SSHFlags: e.endpoint.SSHFlags})
		assert.Equal(t, kind, p.Engine())
		assert.Equal(t, local, p.Local())
		if !local {
			// This machine's ids mean nothing on another one: the image's
			// unprivileged account.
			sb := acquire(t, p, sandbox.Spec{})
			r := run(context.Background(), t, sb, sh(`id -u; id -g; stat -c '%a %u' /workspace`))
			require.True(t, r.status.Success(), r.stderr)
			assert.Equal(t, "1000\n1000\n755 1000\n", r.stdout)
		}
	}
}

// testRefusesHostFiles checks the configuration errors of a remote engine.
func testRefusesHostFiles(host string, flags []string) func(t *testing.T) {
	return func(t *testing.T) {
		p := newProvider(t, docker.Options{Host: host, SSHFlags: flags})
		ctx := context.Background()
		f, err := os.CreateTemp(t.TempDir(), "sock")
		require.NoError(t, err)
		f.Close()
		for name, spec := range map[string]sandbox.Spec{
			"workspace": {Workspace: t.TempDir()},
			"mount":     {Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/opt/cli"}}},
			"forward":   {Network: "none", Forwards: []sandbox.Forward{{Socket: f.Name(), Port: 4000}}},
		} {
			_, err := p.Acquire(ctx, spec)
			require.Error(t, err, name)
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: %v", name, err)
			assert.Contains(t, err.Error(), "not on this machine", name)
		}
		assert.Empty(t, p.Live())
	}
}
