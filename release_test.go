package outpost_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/internal/version"
)

// runRelease runs scripts/release.sh for linux/amd64 only, offline
// (GOPROXY=off) and with VCS stamping off, as a go build outside a checkout
// would be.
func runRelease(t *testing.T, ver, out string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "scripts/release.sh", ver, out)
	cmd.Env = append(os.Environ(), "OUTPOST_RELEASE_PLATFORMS=linux/amd64", "GOPROXY=off", "GOFLAGS=-buildvcs=false")
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestReleaseScript: scripts/release.sh builds a static linux/amd64 binary
// offline and its SHA256SUMS line; the binary's --version names the declared
// version, the commit and the pinned CLIs even though -buildvcs=false; the
// same build twice gives the same bytes (the second with GOAMD64 and GOARM64
// in the environment); a VERSION other than the declared one is refused.
func TestReleaseScript(t *testing.T) {
	testenv.Short(t) // builds the outpost command
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out := t.TempDir()
	msg, err := runRelease(t, version.Declared, out)
	require.NoError(t, err, msg)

	bin := filepath.Join(out, "outpost-linux-amd64")
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  outpost-linux-amd64\n", string(sums))
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "only the requested platform and the checksums")

	// The same source gives the same bytes, whatever the releaser's
	// environment says of the target CPU.
	again := t.TempDir()
	msg, err = runRelease(t, version.Declared, again, "GOAMD64=v3", "GOARM64=v9.0")
	require.NoError(t, err, msg)
	sums2, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	require.NoError(t, err)
	assert.Equal(t, string(sums), string(sums2), "the build is reproducible")

	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		cmd := exec.Command(bin, "--version")
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		got, err := cmd.Output()
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		require.GreaterOrEqual(t, len(lines), 3, string(got))
		assert.Equal(t, "outpost "+version.Declared, lines[0])
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err == nil {
			assert.True(t, strings.HasPrefix(lines[1], "commit "+strings.TrimSpace(string(head))), lines[1])
		}
		for _, a := range agents.Builtin().All() {
			if a.CLI != nil && a.CLI.Version != "" {
				assert.Contains(t, lines, a.Name+" "+a.CLI.Version+" (pinned CLI)")
			}
		}
	}

	msg, err = runRelease(t, "v0.0.0-other", t.TempDir())
	require.Error(t, err)
	assert.Contains(t, msg, "differs from the version the source declares")
}
