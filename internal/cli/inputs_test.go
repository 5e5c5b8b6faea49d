package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostileEnvFile: values no process environment can carry — a NUL
// byte, a value larger than an exec allows, a file larger than the bound —
// are configuration errors (exit 2) before anything runs, never a CLI that
// "did not run" (exit 1), and the value is never shown.
func TestHostileEnvFile(t *testing.T) {
	for name, content := range map[string]string{
		"nul":        "TOKEN=MARK-a\x00b\n",
		"huge value": "TOKEN=MARK-" + strings.Repeat("v", 200<<10) + "\n",
		"huge file":  strings.Repeat("# MARK-padding line\n", 60_000),
	} {
		t.Run(name, func(t *testing.T) {
			project := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(project, ".outpost"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(project, ".outpost", ".env"), []byte(content), 0o600))
			t.Chdir(project)
			r := execute(t, "x", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--no-store", "-")
			assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
			assert.NotContains(t, r.stdout+r.stderr, "MARK-")
			assert.Contains(t, r.stderr, ".env")
		})
	}
}

// TestWorkspaceHoldingHome: a workspace that is, or contains, the user's
// home directory is refused: the agent would get every file of the user.
func TestWorkspaceHoldingHome(t *testing.T) {
	parent := t.TempDir()
	home := filepath.Join(parent, "me")
	require.NoError(t, os.Mkdir(home, 0o700))
	env := map[string]string{"HOME": home}
	for _, ws := range []string{home, parent} {
		r := execute(t, "x", env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--no-store", "--workspace", ws, "-")
		assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "holds your home directory")
	}
	// A project inside the home is fine.
	project := filepath.Join(home, "project")
	require.NoError(t, os.Mkdir(project, 0o700))
	r := execute(t, "emit {\"type\":\"result\",\"text\":\"ok\"}\nemit {\"type\":\"finished\",\"ok\":true}", env,
		"run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--no-store", "--workspace", project, "-")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
}
