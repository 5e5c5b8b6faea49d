package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/version"
)

// TestVersionFlag: --version prints the declared version on its first line,
// then the commit and every pinned CLI version.
func TestVersionFlag(t *testing.T) {
	r := execute(t, "", nil, "--version")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "outpost "+version.Declared, lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "commit "), lines[1])
	pins := 0
	for _, a := range agents.Builtin().All() {
		if a.CLI != nil && a.CLI.Version != "" {
			assert.Contains(t, lines, a.Name+" "+a.CLI.Version+" (pinned CLI)")
			pins++
		}
	}
	assert.GreaterOrEqual(t, pins, 3)
}

func TestReleaseImageTag(t *testing.T) {
	for _, c := range []struct {
		image, version string
		baked          bool
		want           string
	}{
		{"outpost/base:dev", "v0.9.0", false, "outpost/base:v0.9.0"},
		{"outpost/base:dev", "v0.9.0", true, "outpost/base:v0.9.0-clis"},
		{"outpost/base", "v1.2.3-rc.1+meta", false, "outpost/base:v1.2.3-rc.1-meta"},
		{"127.0.0.1:5000/outpost/base:dev", "v1.0.0", true, "127.0.0.1:5000/outpost/base:v1.0.0-clis"},
		{"127.0.0.1:5000/base", "v1.0.0", false, "127.0.0.1:5000/base:v1.0.0"},
		{"outpost/base:dev", "", false, "outpost/base:unknown"},
	} {
		assert.Equal(t, c.want, releaseImageTag(c.image, c.version, c.baked), "%+v", c)
	}
}

// TestImageBuildReleaseRefusesTag: --release derives the tag, so an
// explicit --tag is a usage error.
func TestImageBuildReleaseRefusesTag(t *testing.T) {
	r := execute(t, "", nil, "image", "build", "--release", "--tag", "x:y")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--release")
}
