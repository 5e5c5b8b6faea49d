package docker_test

import (
	"os"
	"testing"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
)

// TestConformance holds the Docker provider to the sandbox contract, on the
// host network (as the integration tests use it to reach loopback servers).
//
// The suite's workspaces come from t.TempDir (mode 0700, owned by the test
// process). When the tests run as root (CI), only uid 0 can use them, so the
// leases run as "0:0" there — still without capabilities and with
// no-new-privileges; TestDefaultUserIsNotRoot and TestHardening cover the
// unprivileged default.
func TestConformance(t *testing.T) {
	engine(t)
	spec := sandbox.Spec{Network: "host"}
	if os.Getuid() == 0 {
		spec.User = "0:0"
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		return newProvider(t, docker.Options{})
	}, sandboxtest.WithSpec(spec))
}

// TestConformanceExecs holds the exec path to the contract too: in
// TestConformance each lease's first command is run by its keeper.
func TestConformanceExecs(t *testing.T) {
	engine(t)
	spec := sandbox.Spec{Network: "host"}
	if os.Getuid() == 0 {
		spec.User = "0:0"
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		p := newProvider(t, docker.Options{})
		docker.ExecsOnly(p)
		return p
	}, sandboxtest.WithSpec(spec))
}
