package testkind_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest/testkind"
)

// TestConformance: the leases of the test kind's engine pass the sandbox
// conformance suite.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		e, err := testkind.Kind().Open(context.Background(), sandbox.Config{Getenv: os.Getenv})
		require.NoError(t, err)
		t.Cleanup(e.Close)
		p, _, err := e.Lease(nil, "")
		require.NoError(t, err)
		return p
	})
}
