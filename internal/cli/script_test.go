package cli

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the end-to-end command scripts in testdata/script: the
// real outpost command (this test binary) and the fake agent CLI compiled
// into it, every command's success and error paths and exit codes.
//
// Besides the standard commands, scripts use:
//
//	exits N PROG ARGS...   run PROG and require exit status N
func TestScripts(t *testing.T) {
	fixtures, err := filepath.Abs(filepath.Join("..", "..", "adapters", "claude", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("CLAUDE_FIXTURES", fixtures)
			env.Setenv("OUTPOST_CACHE_DIR", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("OUTPOST_STATE_DIR", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("DOCKER_HOST", "unix://"+filepath.Join(env.WorkDir, "no-docker.sock"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits N PROG ARGS...")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				got := 0
				if err := ts.Exec(args[1], args[2:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("%s: %v", args[1], err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("%s exited %d, want %d", args[1], got, want)
				}
			},
		},
	})
}
