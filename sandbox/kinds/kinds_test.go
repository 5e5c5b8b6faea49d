package kinds_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/kinds"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// TestBuiltin: every built-in kind is a complete row under its own name.
func TestBuiltin(t *testing.T) {
	b := kinds.Builtin()
	assert.Equal(t, []string{"docker", "host", "kubernetes", "podman"}, b.Names())
	for name, k := range b {
		assert.Equal(t, name, k.Name)
		assert.NotEmpty(t, k.Summary, name)
		assert.NotNil(t, k.Open, name)
	}
	for _, name := range []string{"docker", "podman", "kubernetes"} {
		assert.NotNil(t, b[name].TaskImages, "%s builds task images", name)
	}
	assert.Nil(t, b["host"].TaskImages, "the host runs no image")
	_, err := b.Lookup("vm")
	assert.ErrorContains(t, err, `sandbox must be one of docker, host, kubernetes, podman, not "vm"`)
	k, err := b.Lookup("")
	assert.NoError(t, err)
	assert.Equal(t, sandbox.DefaultKind, k.Name)
}

// TestSameDefaultLimits: pods and Docker leases get the same default
// limits and image, the ones package sandbox documents.
func TestSameDefaultLimits(t *testing.T) {
	for _, d := range []struct {
		cpus      float64
		mem, pids int64
		image     string
	}{{docker.DefaultCPUs, docker.DefaultMemoryBytes, docker.DefaultPids, docker.DefaultImage},
		{kubernetes.DefaultCPUs, kubernetes.DefaultMemoryBytes, kubernetes.DefaultPids, kubernetes.DefaultImage}} {
		assert.Equal(t, sandbox.DefaultCPUs, d.cpus)
		assert.Equal(t, sandbox.DefaultMemoryBytes, d.mem)
		assert.Equal(t, sandbox.DefaultPids, d.pids)
		assert.Equal(t, sandbox.DefaultImage, d.image)
	}
}
