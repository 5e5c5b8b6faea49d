package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/outposterr"
)

// TestTestList: SWE-bench's lists read as arrays or as strings holding one.
func TestTestList(t *testing.T) {
	var row SWEBenchRow
	require.NoError(t, json.Unmarshal([]byte(`{"FAIL_TO_PASS":"[\"a::b\", \"c\"]","PASS_TO_PASS":["d"]}`), &row))
	assert.Equal(t, TestList{"a::b", "c"}, row.FailToPass)
	assert.Equal(t, TestList{"d"}, row.PassToPass)
	require.NoError(t, json.Unmarshal([]byte(`{"FAIL_TO_PASS":"","PASS_TO_PASS":null}`), &row))
	assert.Empty(t, row.FailToPass)
	err := json.Unmarshal([]byte(`{"PASS_TO_PASS":"a::b"}`), &row)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PASS_TO_PASS: want a list of test names")
}

// endless is an endless run of one byte.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// TestImportRowBound: a row line over the bound ends the import with an
// error naming it, without reading the rest of the line (here endless).
func TestImportRowBound(t *testing.T) {
	in := io.MultiReader(strings.NewReader("\n"+`{"instance_id":"`), endless('a'))
	_, err := ImportSWEBench(context.Background(), in, SWEBenchOptions{Repos: t.TempDir(), Agent: "claude"},
		func(batch.Job) error { return nil })
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("dataset line 2: longer than %d bytes", maxRow))
}

// TestImportBadInput: rows that cannot become a job are configuration
// errors naming the row and the field, before any mirror is looked at.
func TestImportBadInput(t *testing.T) {
	opts := SWEBenchOptions{Repos: t.TempDir(), Agent: "claude"}
	row := `{"instance_id":"i","repo":"o/n","base_commit":"` + strings.Repeat("a", 40) + `","problem_statement":"p","FAIL_TO_PASS":["t"]}`
	for _, c := range []struct{ in, want string }{
		{"", "the dataset is empty"},
		{"\n\n" + strings.Replace(row, `"i"`, `""`, 1), "dataset line 3: no instance_id"},
		{strings.Replace(row, `"o/n"`, `"o/n/x"`, 1), `instance i: repo "o/n/x" is not owner/name`},
		{strings.Replace(row, strings.Repeat("a", 40), "main", 1), `base_commit "main" is not a full commit id`},
		{strings.Replace(row, `"p"`, `" "`, 1), "instance i: no problem_statement"},
		{`[{"instance_id": 5}]`, "dataset row 1: json: cannot unmarshal number"},
		{row, "instance i: no mirror of o/n"},
	} {
		_, err := ImportSWEBench(context.Background(), strings.NewReader(c.in), opts, func(batch.Job) error { return nil })
		require.Error(t, err, c.in)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := ImportSWEBench(context.Background(), strings.NewReader(row), SWEBenchOptions{Repos: t.TempDir()}, nil)
	assert.ErrorContains(t, err, "no agent")
}

// TestImportWritesBatchJobs: a row becomes a job that batch compiles as
// it stands, and its line reads back unchanged as a strict jobs-file line;
// the import writes batch's own job type, so the two cannot drift.
func TestImportWritesBatchJobs(t *testing.T) {
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

	row := fmt.Sprintf(`{"instance_id":"acme__calc-1","repo":"acme/calc","base_commit":%q,"problem_statement":"fix add",`+
		`"FAIL_TO_PASS":"[\"tests/test_calc.py::test_add\"]","PASS_TO_PASS":[],"test_patch":"--- a/x\n+++ b/x\n"}`, commit)
	var got []batch.Job
	n, err := ImportSWEBench(context.Background(), strings.NewReader(row), SWEBenchOptions{Repos: repos, Agent: "claude",
		Attempts: 3, Timeout: 90 * time.Second}, func(j batch.Job) error { got = append(got, j); return nil })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, got, 1)
	j := got[0]
	require.NoError(t, j.Compile(), "the imported job is one batch runs")
	assert.Equal(t, mirror, j.Source.Repo)
	assert.Equal(t, commit, j.Source.Commit)
	assert.Equal(t, 3, j.Attempts)
	assert.Equal(t, batch.Duration(90*time.Second), j.Verify.Timeout)
	assert.Equal(t, []string{"tests/test_calc.py::test_add"}, j.Verify.FailToPass)
	assert.Empty(t, j.Verify.PassToPass)
	assert.Equal(t, "pytest", j.Verify.Parser)
	assert.Contains(t, j.Verify.Command, "tests/test_calc.py::test_add")
	assert.JSONEq(t, `{"instance_id":"acme__calc-1","repo":"acme/calc"}`, string(j.Metadata))

	b, err := json.Marshal(j)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var back batch.Job
	require.NoError(t, dec.Decode(&back), string(b))
	require.NoError(t, back.Compile())
	again, err := json.Marshal(back)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(again))
}
