package bootstrap_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
)

// TestBakeGateway: the build context of --with-gateway holds the outpost
// executable, mode 0755, copied at the path a gateway sidecar looks for it,
// next to a stamp of its SHA-256, and labels the image with its version
// and SHA-256; without CLIs there is
// no CLI layer, and with nothing to bake the context is refused.
func TestBakeGateway(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "outpost")
	content := []byte("\x7fELF not really outpost")
	require.NoError(t, os.WriteFile(bin, content, 0o700))
	sum := sha256.Sum256(content)

	dir := t.TempDir()
	df, err := bootstrap.WriteBakeContextWithGateway(dir, "outpost/base:dev", bootstrap.Gateway{Binary: bin, Version: "v9.9.9 abc123"})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, df))
	require.NoError(t, err)
	assert.Equal(t, "FROM outpost/base:dev\nCOPY gateway/outpost gateway/outpost.sha256 /opt/outpost/gateway/\n"+
		`LABEL dev.outpost.gateway="v9.9.9 abc123 sha256:`+hex.EncodeToString(sum[:])+"\"\n", string(b))
	staged := filepath.Join(dir, "gateway", "outpost")
	fi, err := os.Stat(staged)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the sidecar's user runs it")
	got, err := os.ReadFile(staged)
	require.NoError(t, err)
	assert.Equal(t, content, got)
	// The stamp a sidecar reads instead of hashing the executable.
	stamp, err := os.ReadFile(staged + ".sha256")
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:])+"\n", string(stamp))
	fi, err = os.Stat(staged + ".sha256")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "the sidecar's user reads it")

	_, err = bootstrap.WriteBakeContextWithGateway(t.TempDir(), "outpost/base:dev", bootstrap.Gateway{})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = bootstrap.WriteBakeContextWithGateway(t.TempDir(), "outpost/base:dev", bootstrap.Gateway{Binary: bin + "-missing"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}
