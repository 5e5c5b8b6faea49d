package kubernetes_test

import (
	"testing"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
)

// TestConformance holds the Kubernetes provider to the sandbox contract on
// the pod network. The suite's Workspace check exercises the copy-in and the
// sync back of a host directory.
func TestConformance(t *testing.T) {
	newProvider(t, kubernetes.Options{}) // skips (fails in CI) once without a cluster
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		return newProvider(t, kubernetes.Options{})
	}, sandboxtest.WithTimeout(45*time.Second))
}
