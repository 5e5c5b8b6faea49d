package harness

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/source"
)

func (vt *verifyTask) grade(t *testing.T, patch []byte, vf Verifier) *Verification {
	t.Helper()
	v := Verify(context.Background(), VerifyInput{Provider: vt.prov,
		Source:   Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return vt.snap.Tar(ctx), nil }, Patch: patch},
		Verifier: vf})
	require.NotNil(t, v)
	return v
}

// TestVerifyTestListsDecide: with test lists the output's outcomes decide
// the verdict, not the exit code; the whole output is parsed, stderr too,
// not only the tail kept.
func TestVerifyTestListsDecide(t *testing.T) {
	vt := newVerifyTask(t)
	lists := &TestLists{Parser: grading.Pytest, FailToPass: []string{"tests/a.py::test_new"}, PassToPass: []string{"tests/a.py::test_old"}}
	junk := "head -c 40000 /dev/zero | tr '\\0' x; echo"

	v := vt.grade(t, nil, Verifier{Tests: lists,
		Command: "echo 'PASSED tests/a.py::test_new'; " + junk + "; echo 'tests/a.py::test_old PASSED' >&2; echo 'FAILED tests/b.py::test_other - boom'; exit 1"})
	assert.Equal(t, VerdictPass, v.Verdict, "%+v", v)
	assert.Equal(t, 1.0, reward(v))
	assert.Equal(t, 1, *v.ExitCode, "a failing test outside the lists does not matter")
	assert.NotContains(t, v.Output, "test_new", "the line parsed is out of the tail kept")
	require.NotNil(t, v.Grading)
	assert.Equal(t, grading.Count{Passed: 1, Total: 1}, v.Grading.FailToPass)
	assert.Equal(t, grading.Count{Passed: 1, Total: 1}, v.Grading.PassToPass)
	assert.Equal(t, map[grading.Status]int{grading.Failed: 1}, v.Grading.Other)

	v = vt.grade(t, nil, Verifier{Tests: lists, Command: "echo 'PASSED tests/a.py::test_new'"})
	assert.Equal(t, VerdictFail, v.Verdict, "exit 0, but a listed test is missing: %+v", v)
	assert.Equal(t, 0.0, reward(v))
	assert.Equal(t, []grading.TestOutcome{{Name: "tests/a.py::test_new", Group: grading.FailToPass, Status: grading.Passed},
		{Name: "tests/a.py::test_old", Group: grading.PassToPass, Status: grading.Missing}}, v.Grading.Tests)

	v = vt.grade(t, nil, Verifier{Tests: lists, Command: "echo 'PASSED tests/a.py::test_new'; echo 'FAILED tests/a.py::test_old - broke'"})
	assert.Equal(t, VerdictFail, v.Verdict, "a pass-to-pass test broke: %+v", v)

	v = vt.grade(t, nil, Verifier{Tests: lists, Command: "echo 'PASSED tests/a.py::test_new'; echo 'PASSED tests/a.py::test_old'; echo 0.5 > \"$OUTPOST_REWARD_FILE\""})
	assert.Equal(t, VerdictPass, v.Verdict)
	assert.Equal(t, 0.5, reward(v), "the verifier's reward wins")

	v = vt.grade(t, nil, Verifier{Tests: lists, Command: "no-such-test-runner"})
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Contains(t, v.Error, "exit 127")

	v = vt.grade(t, nil, Verifier{Tests: &TestLists{Parser: "junit", FailToPass: []string{"x"}}, Command: "true"})
	assert.Equal(t, VerdictError, v.Verdict)
	assert.Contains(t, v.Error, `unknown parser "junit"`)
}

// goTask is a Go module whose Mul is wrong; its test patch adds the test
// of Mul (fail-to-pass) and a case to the test of Add (pass-to-pass). A
// test outside the lists always fails.
type goTask struct {
	*verifyTask
	testPatch []byte
}

func newGoTask(t *testing.T) *goTask {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not installed")
	}
	vt := newVerifyTask(t) // for its helpers; its repository is replaced
	vt.repo = t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(vt.repo, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(vt.repo, name), []byte(data), 0o644))
	}
	write("go.mod", "module example.com/calc\n\ngo 1.22\n")
	write("calc.go", "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Mul(a, b int) int { return a + b }\n")
	write("calc_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n")
	write("other_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestUnrelated(t *testing.T) { t.Fatal(\"always\") }\n")
	vt.git(t, "init", "-q")
	vt.git(t, "add", "-A")
	vt.git(t, "commit", "-qm", "task")
	gt := &goTask{verifyTask: vt}
	gt.testPatch = vt.patch(t, `cat > mul_test.go <<'EOF'
package calc

import "testing"

func TestMul(t *testing.T) {
	if got := Mul(2, 3); got != 6 {
		t.Fatalf("2*3: got %d", got)
	}
}
EOF
cat >> calc_test.go <<'EOF'

func TestAddZero(t *testing.T) {
	if Add(0, 5) != 5 {
		t.Fatal("0+5")
	}
}
EOF`)
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	vt.snap, err = p.Prepare(context.Background(), source.Spec{Repo: vt.repo, Commit: "HEAD"})
	require.NoError(t, err)
	// The host sandbox passes on only what it is given: go, and the
	// test process's build cache so that nothing is compiled twice.
	env := map[string]string{"PATH": filepath.Dir(goBin) + ":" + os.Getenv("PATH"), "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOROOT"} {
		out, err := exec.Command(goBin, "env", name).Output()
		require.NoError(t, err)
		env[name] = strings.TrimSpace(string(out))
	}
	vt.prov = host.New(host.Options{Env: env, TempDir: t.TempDir()})
	return gt
}

// realFix is the edit that fixes Mul.
const realFix = "sed -i 's/func Mul(a, b int) int { return a + b }/func Mul(a, b int) int { return a * b }/' calc.go"

func (gt *goTask) verifier() Verifier {
	return Verifier{Command: "go test -json ./...", TestPatch: gt.testPatch,
		Tests: &TestLists{Parser: grading.GoTestJSON, FailToPass: []string{"TestMul"},
			PassToPass: []string{"TestAdd", "example.com/calc.TestAddZero"}}}
}

// TestVerifyGoTestJSON grades a Go module SWE-bench style: the test patch
// goes in after the attempt's patch, go test -json's events decide.
func TestVerifyGoTestJSON(t *testing.T) {
	gt := newGoTask(t)
	fix := gt.patch(t, realFix)
	require.Contains(t, string(fix), "a * b")

	v := gt.grade(t, fix, gt.verifier())
	assert.Equal(t, VerdictPass, v.Verdict, "%+v", v)
	assert.Equal(t, 1.0, reward(v))
	require.NotNil(t, v.ExitCode)
	assert.NotEqual(t, 0, *v.ExitCode, "TestUnrelated fails, outside the lists")
	require.NotNil(t, v.Grading)
	assert.Equal(t, []grading.TestOutcome{
		{Name: "TestMul", Group: grading.FailToPass, Status: grading.Passed},
		{Name: "TestAdd", Group: grading.PassToPass, Status: grading.Passed},
		{Name: "example.com/calc.TestAddZero", Group: grading.PassToPass, Status: grading.Passed},
	}, v.Grading.Tests)
	assert.Equal(t, 1, v.Grading.Other[grading.Failed], "TestUnrelated")

	v = gt.grade(t, nil, gt.verifier())
	assert.Equal(t, VerdictFail, v.Verdict, "the untouched source: %+v", v)
	assert.Equal(t, grading.Failed, v.Grading.Tests[0].Status)
	assert.Equal(t, grading.Count{Passed: 2, Total: 2}, v.Grading.PassToPass)

	broke := gt.patch(t, "sed -i 's/func Add(a, b int) int { return a + b }/func Add(a, b int) int { return a - b }/; s/func Mul(a, b int) int { return a + b }/func Mul(a, b int) int { return a * b }/' calc.go")
	v = gt.grade(t, broke, gt.verifier())
	assert.Equal(t, VerdictFail, v.Verdict, "Mul fixed, Add broken: %+v", v)
	assert.Equal(t, grading.Count{Passed: 1, Total: 1}, v.Grading.FailToPass)
	assert.Equal(t, grading.Count{Passed: 0, Total: 2}, v.Grading.PassToPass)

	v = gt.grade(t, gt.patch(t, "echo 'func Mul(' >> calc.go"), gt.verifier())
	assert.Equal(t, VerdictFail, v.Verdict, "a patch that does not build: %+v", v)
	assert.Equal(t, grading.Missing, v.Grading.Tests[0].Status)
}

// TestVerifyTestPatchTampering: an attempt that writes the test patch's
// files — a trivial TestMul in the new test file, a rewritten test of Add
// — is graded on the real tests: their paths are reset to the source's
// before the test patch goes in, so it neither passes nor errs.
func TestVerifyTestPatchTampering(t *testing.T) {
	gt := newGoTask(t)
	for name, edit := range map[string]string{
		"a trivial new test": "printf 'package calc\\n\\nimport \"testing\"\\n\\nfunc TestMul(t *testing.T) {}\\n' > mul_test.go",
		"an edited test":     "printf '\\nfunc TestMul(t *testing.T) {}\\n' >> calc_test.go",
		"a link":             "ln -s calc.go mul_test.go",
		"a directory":        "mkdir mul_test.go && echo x > mul_test.go/x",
		"a removed test":     "rm calc_test.go",
	} {
		t.Run(name, func(t *testing.T) {
			v := gt.grade(t, gt.patch(t, edit), gt.verifier())
			assert.Equal(t, VerdictFail, v.Verdict, "%+v", v)
			assert.Empty(t, v.Error, "the test patch applied")
			require.NotNil(t, v.Grading)
			assert.Equal(t, grading.Failed, v.Grading.Tests[0].Status, "the real TestMul ran")

			v = gt.grade(t, gt.patch(t, realFix+" && "+edit), gt.verifier())
			assert.Equal(t, VerdictPass, v.Verdict, "the real fix with the same tampering: %+v", v)
		})
	}
}

func TestVerifyTestPatchErrors(t *testing.T) {
	gt := newGoTask(t)
	vf := gt.verifier()
	vf.TestPatch = []byte("diff --git a/calc_test.go b/calc_test.go\n--- a/calc_test.go\n+++ b/calc_test.go\n@@ -1,2 +1,2 @@\n-package nothere\n+package calc\n \n")
	v := gt.grade(t, nil, vf)
	assert.Equal(t, VerdictError, v.Verdict, "%+v", v)
	assert.Nil(t, v.Reward)
	assert.Nil(t, v.ExitCode)
	assert.Contains(t, v.Error, "the test patch does not apply to the source")

	vf.TestPatch = []byte("not a diff\n")
	v = gt.grade(t, nil, vf)
	assert.Equal(t, VerdictError, v.Verdict)
	assert.Contains(t, v.Error, "the test patch: the patch names no file")

	// The attempt's own patch that does not apply stays a fail.
	v = gt.grade(t, []byte("diff --git a/nope.go b/nope.go\n--- a/nope.go\n+++ b/nope.go\n@@ -1 +1 @@\n-a\n+b\n"), gt.verifier())
	assert.Equal(t, VerdictFail, v.Verdict)
	assert.Contains(t, v.Error, "the attempt's patch does not apply")
}
