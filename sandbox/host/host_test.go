package host_test

import (
	"os"
	"testing"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest"
)

// baseEnv is what cmd would pass: the test's PATH only.
func baseEnv() map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH")}
}

func newProvider(t *testing.T) sandbox.Provider {
	t.Helper()
	return host.New(host.Options{Env: baseEnv(), TempDir: t.TempDir()})
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newProvider)
}
