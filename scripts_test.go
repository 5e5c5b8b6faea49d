package outpost_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestInstallCLIsPinsAreTheRegistrys: scripts/install-clis.sh installs
// exactly the pins of the registry's default agents, read from the outpost
// binary (outpost bootstrap --print), each at the version its adapter is
// written against; the script repeats none of them.
func TestInstallCLIsPinsAreTheRegistrys(t *testing.T) {
	testenv.Short(t) // builds the outpost command
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command("bash", "scripts/install-clis.sh", "--print").Output()
	require.NoError(t, err, "install-clis.sh --print")
	var want []string
	for _, a := range agents.Builtin().All() {
		if !a.Default || a.CLI == nil {
			continue
		}
		spec, bin, ok := a.CLI.NPMLauncher(bootstrap.HostPlatform())
		require.True(t, ok, "%s: a default CLI is on npm", a.Name)
		assert.Equal(t, a.Name+" "+a.CLI.Version, a.New().(interface{ String() string }).String(),
			"%s: the adapter is written against the pinned version", a.Name)
		want = append(want, strings.Join([]string{a.CLI.Command(), spec, bin, a.CLI.WantVersion()}, "|"))
	}
	require.Len(t, want, 3)
	assert.Equal(t, want, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))

	script, err := os.ReadFile("scripts/install-clis.sh")
	require.NoError(t, err)
	for _, a := range agents.Builtin().All() {
		if a.CLI != nil && a.CLI.Version != "" {
			assert.NotContains(t, string(script), a.CLI.Version, "the script repeats %s's pin", a.Name)
		}
	}
}
