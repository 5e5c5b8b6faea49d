package dataset

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/outposterr"
)

// TestImportArrayWhole: a JSON array dataset cut between two rows (no
// closing ]) or followed by more text is a configuration error, not a
// smaller dataset imported in silence.
func TestImportArrayWhole(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine: the import checks the mirror with it")
	}
	repos := t.TempDir()
	mirror := filepath.Join(repos, "acme", "calc")
	require.NoError(t, os.MkdirAll(mirror, 0o755))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", mirror, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(mirror, "calc.py"), []byte("x = 1\n"), 0o644))
	git("add", ".")
	git("commit", "-q", "-m", "base")
	commit := git("rev-parse", "HEAD")
	row := func(id string) string {
		return fmt.Sprintf(`{"instance_id":%q,"repo":"acme/calc","base_commit":%q,"problem_statement":"fix","FAIL_TO_PASS":["t"]}`, id, commit)
	}
	opts := SWEBenchOptions{Repos: repos, Agent: "claude"}
	imp := func(in string) (int, error) {
		return ImportSWEBench(context.Background(), strings.NewReader(in), opts, func(batch.Job) error { return nil })
	}

	n, err := imp("[" + row("a") + ",\n" + row("b") + "]\n")
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	for _, c := range []struct{ in, want string }{
		{"[" + row("a") + ",\n" + row("b"), "ends after row 2 without its closing ]"},
		{"[" + row("a") + "\n", "ends after row 1 without its closing ]"},
		{"[" + row("a") + "] " + row("b"), "text after the dataset's JSON array"},
		{"[" + row("a") + "]\n[" + row("b") + "]", "text after the dataset's JSON array"},
	} {
		_, err := imp(c.in)
		require.Error(t, err, c.in)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
		assert.Contains(t, err.Error(), c.want)
	}
}
