package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestBatchResultsFileLocked: while one outpost batch holds a results
// file, a second one on the same file is refused before anything runs
// (it would run the same pending jobs again and append their lines too),
// and the file is left as it was.
func TestBatchResultsFileLocked(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte(`{"id":"a","agent":"fake","prompt":"p"}`+"\n"+
		`{"id":"b","agent":"fake","prompt":"p"}`+"\n"), 0o600))
	results := filepath.Join(dir, "results.jsonl")
	line := `{"job":"a","attempt":1,"outcome":{"ok":true}}` + "\n"
	require.NoError(t, os.WriteFile(results, []byte(line), 0o600))

	// The batch running on it: its lock.
	held, err := os.OpenFile(results, os.O_RDWR|os.O_APPEND, 0)
	require.NoError(t, err)
	defer held.Close()
	require.NoError(t, syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))

	r := execute(t, "", nil, "batch", jobs, "--results", results, "--resume", "--sandbox", "host", "--auth", "none", "--no-store")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
	assert.Contains(t, r.stderr, "is in use by another outpost batch")
	b, err := os.ReadFile(results)
	require.NoError(t, err)
	assert.Equal(t, line, string(b), "the file is unchanged")

	// A batch that stops before running anything leaves no results file.
	fresh := filepath.Join(dir, "fresh.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte(`{"id":"a","agent":"no-such-agent","prompt":"p"}`+"\n"), 0o600))
	r = execute(t, "", nil, "batch", jobs, "--results", fresh, "--sandbox", "host", "--auth", "none", "--no-store")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
	assert.NoFileExists(t, fresh)
}

// TestResultsMendTail: before lines are appended, a torn last line (not a
// whole JSON value) is cut off and a whole last line without its newline
// gets one; a file ending in a newline is left alone.
func TestResultsMendTail(t *testing.T) {
	whole := `{"job":"a","attempt":1,"outcome":{"ok":true}}`
	for _, tc := range []struct{ name, in, want string }{
		{"torn", whole + "\n" + `{"job":"b","outc`, whole + "\n"},
		{"torn only line", `{"job":"b","outc`, ""},
		{"whole without newline", whole, whole + "\n"},
		{"ended", whole + "\n", whole + "\n"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "results.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.in), 0o600))
			rf, err := openResults(path)
			require.NoError(t, err)
			_, err = rf.mendTail()
			require.NoError(t, err)
			_, err = rf.fh.Write([]byte(`{"job":"c"}` + "\n"))
			require.NoError(t, err)
			rf.close()
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want+`{"job":"c"}`+"\n", string(b))
			r, err := readResults(path)
			require.NoError(t, err)
			assert.Contains(t, r.latest, "c", "the appended line reads back")
		})
	}
}

// TestGradeTornResultsLine: a grading whose results.jsonl ends in a torn
// line (the grader was killed mid-write) continues: the torn attempt is
// graded again and its new line reads back whole, not glued to the torn
// fragment (which left it without a result, exit 1, and graded again on
// every later run).
func TestGradeTornResultsLine(t *testing.T) {
	testenv.Short(t)
	dir := t.TempDir()
	task := filepath.Join(dir, "tasks", "app")
	ws := filepath.Join(task, "workspace")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "instruction.md"), []byte("Make app.sh print 2.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "task.json"), []byte(`{"verify":{"timeout":"1m"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "tests", "test.sh"), []byte("[ \"$(sh app.sh)\" = 2 ]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "app.sh"), []byte("echo 1\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "task"}} {
		git := exec.Command("git", args...)
		git.Dir = ws
		git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := git.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	patch := `"diff --git a/app.sh b/app.sh\n--- a/app.sh\n+++ b/app.sh\n@@ -1 +1 @@\n-echo 1\n+echo 2\n"`
	preds := `{"instance_id":"app","model_patch":` + patch + "}\n" + `{"instance_id":"app","model_patch":""}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "preds.jsonl"), []byte(preds), 0o600))
	graded := filepath.Join(dir, "graded")
	grade := func() runOut {
		return execute(t, "", map[string]string{"PATH": os.Getenv("PATH")}, "grade", filepath.Join(dir, "preds.jsonl"),
			"--tasks", filepath.Join(dir, "tasks"), "--out", graded, "--sandbox", "host", "--concurrency", "1")
	}
	out := grade()
	require.Equal(t, 0, out.code, out.stderr)

	// Tear the last line.
	resultsPath := filepath.Join(graded, "results.jsonl")
	b, err := os.ReadFile(resultsPath)
	require.NoError(t, err)
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2)
	torn := lines[1][:len(lines[1])/2]
	require.NoError(t, os.WriteFile(resultsPath, []byte(lines[0]+torn), 0o600))

	out = grade()
	assert.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stderr, "1 of 2 attempts already graded; grading 1")
	all, err := readResults(resultsPath)
	require.NoError(t, err)
	assert.Len(t, all.latest, 2, "both attempts have a result line")
	out = grade()
	assert.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stderr, "2 of 2 attempts already graded; grading 0")
}
