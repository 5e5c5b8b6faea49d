package e2e

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/actionrun"
	"github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/testenv"
)

// logWriter sends a step's output to the test log.
type logWriter struct{ t *testing.T }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestGitHubAction runs the repository's action.yml as GitHub would
// (internal/actionrun: its steps under bash with the GITHUB_* files and
// variables) on a pull_request event: the release is a freshly built
// outpost served with its SHA256SUMS from 127.0.0.1, the GitHub API a fake
// on 127.0.0.1. A real offline Claude Code turn in Docker writes a file;
// then a small batch runs, one job failing. Each run leaves the step
// summary, the annotations, the outputs (the answer, the patch, the cost),
// the HTML and JUnit reports, and one pull-request comment, which the
// second run edits instead of adding another. The pull request's own
// .outpost/.env (planted with a reserved name, which outpost would refuse)
// is never read: outpost runs from the trusted directory.
func TestGitHubAction(t *testing.T) {
	testenv.Short(t)
	dockerEnv(t, testenv.CLI(t, "claude")) // gates on the engine and the image
	arch := map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || arch == "" {
		t.Skip("the emulated runner is Linux on amd64 or arm64")
	}
	bin, err := os.ReadFile(buildOutpost(t))
	require.NoError(t, err)
	const version = "v0.9.0-e2e"
	rel, err := actionrun.Release(t.TempDir(), version, map[string][]byte{"outpost-linux-" + runtime.GOARCH: bin})
	require.NoError(t, err)
	host := actionrun.FileServer(rel)
	defer host.Close()
	const token = "ghs_e2e-action-token"
	gh := actionrun.NewFakeGitHub(token, "acme", "widgets")
	defer gh.Close()
	gh.Seed(12, "a reviewer's comment")

	root := t.TempDir()
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("# widgets\n"), 0o666))
	require.NoError(t, os.Mkdir(filepath.Join(ws, ".outpost"), 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("PATH=/planted\n"), 0o666))
	trusted := filepath.Join(root, "trusted")
	temp := filepath.Join(root, "temp")
	tools := filepath.Join(root, "tools")
	for _, d := range []string{trusted, temp, tools} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	event := filepath.Join(root, "event.json")
	require.NoError(t, os.WriteFile(event, []byte(`{"action":"opened","pull_request":{"number":12,"head":{"repo":{"full_name":"acme/widgets"}}}}`), 0o644))
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		// The runner's own variables are the emulation's; OUTPOST_* (the
		// CLI cache, a mirror) are the machine's, as on a runner.
		if !strings.HasPrefix(k, "GITHUB_") && !strings.HasPrefix(k, "RUNNER_") {
			env[k] = v
		}
	}
	action, err := actionrun.Load(filepath.Join("..", "action.yml"))
	require.NoError(t, err)
	actionPath, err := filepath.Abs("..")
	require.NoError(t, err)
	run := func(with map[string]string) *actionrun.Result {
		t.Helper()
		with["agent"], with["auth"], with["args"] = "claude", "none", "--offline"
		with["release-url"], with["comment"], with["working-directory"] = host.URL, "true", trusted
		res, err := action.Run(context.Background(), actionrun.Runner{ActionPath: actionPath, ActionRef: version, With: with, Env: env,
			Workspace: ws, Temp: temp, ToolCache: tools, OS: "Linux", Arch: arch, Token: token, Log: logWriter{t},
			Github: map[string]string{"repository": "acme/widgets", "event_name": "pull_request", "event_path": event,
				"api_url": gh.URL, "server_url": "https://github.example", "run_id": "77"}})
		require.NoError(t, err)
		return res
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return string(b)
	}
	ours := func() []actionrun.Comment {
		var out []actionrun.Comment
		for _, c := range gh.Comments(12) {
			if strings.HasPrefix(c.Body, cli.CommentMarker) {
				out = append(out, c)
			}
		}
		return out
	}

	// One turn: the scripted model has Claude Code write a file.
	res := run(map[string]string{"prompt": "[[outpost:scenario=tool]] MARK-action"})
	require.Empty(t, res.Failed, "no step fails")
	assert.Equal(t, "uses", res.Step("cache").Outcome)
	assert.Equal(t, "outpost-clis-Linux-"+arch+"-"+version, res.Step("cache").With["key"])
	o := res.Outputs
	assert.Equal(t, "ok", o["outcome"])
	assert.Empty(t, o["class"])
	assert.Equal(t, "0", o["exit-code"])
	assert.Contains(t, read(o["text-path"]), "MARK-action")
	patch := read(o["patch-path"])
	assert.Contains(t, patch, "outpost-MARK-action.txt", "the file the agent wrote is in the patch")
	assert.NotContains(t, patch, ".outpost")
	cost, err := strconv.ParseFloat(o["cost"], 64)
	require.NoError(t, err, "cost %q", o["cost"])
	assert.Positive(t, cost)
	assert.Contains(t, res.Summary, "## Outpost report")
	assert.Contains(t, res.Summary, "| **total** |")
	var notices []string
	for _, a := range res.Annotations() {
		notices = append(notices, a.Name+": "+a.Message)
	}
	require.NotEmpty(t, notices)
	assert.True(t, strings.HasPrefix(notices[len(notices)-1], "notice: 1 jobs, not graded (no verifier); runs: 1 ok, 0 failed;"), "%v", notices)
	for _, f := range []string{"report.html", "junit.xml"} {
		assert.FileExists(t, filepath.Join(o["report-dir"], f))
	}
	assert.Contains(t, read(filepath.Join(o["report-dir"], "junit.xml")), "<testcase")
	c := ours()
	require.Len(t, c, 1)
	assert.Contains(t, c[0].Body, "Outpost report")
	assert.Contains(t, c[0].Body, "MARK-action")
	assert.Contains(t, c[0].Body, "https://github.example/acme/widgets/actions/runs/77")
	first := c[0].ID

	// A batch from the trusted directory, its jobs in the workspace: one
	// writes a file, one is refused by the model (a 401: auth, exit 5).
	// fail: false keeps the outputs.
	jobs := `{"id":"hello","agent":"claude","prompt":"[[outpost:scenario=tool]] MARK-batch-ok"}` + "\n" +
		`{"id":"denied","agent":"claude","prompt":"[[outpost:scenario=unauthorized]] MARK-batch-denied"}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(trusted, "jobs.jsonl"), []byte(jobs), 0o644))
	res = run(map[string]string{"jobs": "jobs.jsonl", "fail": "false"})
	require.Empty(t, res.Failed)
	o = res.Outputs
	assert.Equal(t, "failed", o["outcome"])
	assert.Equal(t, "process", o["class"])
	assert.Equal(t, "5", o["exit-code"])
	assert.Contains(t, read(o["text-path"]), "## hello\n")
	assert.Contains(t, read(o["patch-path"]), "outpost-MARK-batch-ok.txt", "jobs work in the workspace (--workspace)")
	var errs []string
	for _, a := range res.Annotations() {
		if a.Name == "error" {
			errs = append(errs, a.Props["title"]+": "+a.Message)
		}
	}
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs[0], "outpost job denied (claude)")
	assert.Contains(t, errs[0], "auth")
	assert.Contains(t, res.Summary, "hello")
	assert.Contains(t, res.Summary, "denied")
	c = ours()
	require.Len(t, c, 1, "the comment is updated, not duplicated")
	assert.Equal(t, first, c[0].ID)
	assert.Contains(t, c[0].Body, "**2 jobs, not graded (no verifier); runs&#58; 1 ok, 1 failed**")
	assert.NotContains(t, c[0].Body, "MARK-action")
	assert.Len(t, gh.Comments(12), 2, "the reviewer's and ours")
	var posts, patches int
	for _, call := range gh.Calls() {
		switch {
		case call == "POST /graphql": // who the token is: not a comment
		case strings.HasPrefix(call, "POST "):
			posts++
		case strings.HasPrefix(call, "PATCH "):
			patches++
		}
	}
	assert.Equal(t, [2]int{1, 1}, [2]int{posts, patches}, "one post, then one edit: %v", gh.Calls())

	// The failing batch again, as a gate (fail: true): the last step fails
	// with outpost's exit code, after everything was reported.
	res = run(map[string]string{"jobs": "jobs.jsonl"})
	assert.Equal(t, "result", res.Failed)
	assert.Contains(t, res.Step("result").Stdout, "outpost exited 5")
	require.Len(t, ours(), 1)
}
