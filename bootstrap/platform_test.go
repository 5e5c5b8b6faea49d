package bootstrap

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		out  string
		want Platform
		err  bool
	}{
		{"Linux\nx86_64\n", LinuxX64, false},
		{"Linux\naarch64\n", LinuxARM64, false},
		{"Linux\nx86_64\nmusl\n", LinuxX64Musl, false},
		{"Linux\naarch64\nmusl\n", LinuxARM64Musl, false},
		{"Darwin\narm64\n", "darwin-arm64", false},
		{"Linux\nriscv64\n", "", true},
		{"FreeBSD\namd64\n", "", true},
		{"", "", true},
	}
	for _, tc := range tests {
		got, err := parsePlatform(tc.out)
		if tc.err {
			assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%q: %v", tc.out, err)
			continue
		}
		require.NoError(t, err, tc.out)
		assert.Equal(t, tc.want, got, tc.out)
	}
}

func TestDetectPlatformHost(t *testing.T) {
	sb := hostSandbox(t)
	p, err := DetectPlatform(context.Background(), sb)
	require.NoError(t, err)
	// The host platform, possibly with -musl on a musl host.
	assert.Contains(t, []Platform{HostPlatform(), HostPlatform() + "-musl"}, p)
}

func TestEnsureForOtherPlatform(t *testing.T) {
	b := newBootstrapper(t, Options{Offline: true})
	_, err := b.EnsureFor(context.Background(), "copilot", LinuxX64Musl)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no pinned download for platform linux-x64-musl")
	// Codex's static musl build serves musl systems, from its own cache entry.
	_, err = b.EnsureFor(context.Background(), "codex", LinuxX64Musl)
	assert.ErrorContains(t, err, "downloads are off")
	assertCacheClean(t, b.opts.CacheDir)
}
