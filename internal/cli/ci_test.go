package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/actionrun"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/runrec/runrectest"
	"github.com/outpost-dev/outpost/usage"
)

// readOutputs reads a GITHUB_OUTPUT file as the runner does.
func readOutputs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]string{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		name, delim, ok := strings.Cut(lines[i], "<<")
		if !ok {
			continue
		}
		var val []string
		for i++; lines[i] != delim; i++ {
			val = append(val, lines[i])
		}
		out[name] = strings.Join(val, "\n")
	}
	return out
}

func ghEnv(t *testing.T) map[string]string {
	dir := t.TempDir()
	return map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "output"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"),
		"GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "42"}
}

// TestCIGitHubTurn: one recorded turn is published as GitHub expects: the
// Markdown report appended to the step summary, the outputs (ok, its cost,
// the answer's and the patch's files), the report files, and a comment
// body whose answer cannot break out of its code block.
func TestCIGitHubTurn(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(filepath.Join(dir, "run"), runrec.Manifest{Command: "run", OutpostVersion: "test"})
	require.NoError(t, err)
	answer := "Done.\n```\n@someone <b>hi</b>\n"
	res := &harness.Result{Agent: "claude", Text: answer, Started: time.Now(),
		Usage: usage.Usage{Input: 10, Output: 5, CostUSD: 0.0125, CostKnown: true, CostSource: usage.CostSourceCLI}}
	require.NoError(t, rec.Job("run", 0).Finish(res))
	require.NoError(t, rec.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "patch.diff"), []byte("diff --git a/x b/x\n"), 0o644))
	env := ghEnv(t)
	require.NoError(t, os.WriteFile(env["GITHUB_STEP_SUMMARY"], []byte("earlier step\n"), 0o644))

	out := execute(t, "", env, "ci", "github", "--dir", dir, "--exit-code", "0")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "::notice title=outpost report::1 jobs, not graded (no verifier); runs: 1 ok, 0 failed")
	o := readOutputs(t, env["GITHUB_OUTPUT"])
	assert.Equal(t, map[string]string{"outcome": "ok", "class": "", "exit-code": "0", "cost": "0.0125",
		"text-path": filepath.Join(dir, "text.md"), "patch-path": filepath.Join(dir, "patch.diff"), "report-dir": dir}, o)
	text, err := os.ReadFile(o["text-path"])
	require.NoError(t, err)
	assert.Equal(t, answer, string(text))
	sum, err := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(sum), "earlier step\n## Outpost report"), "appended: %s", sum)
	assert.Contains(t, string(sum), "| **total** |")
	for _, f := range []string{"report.html", "junit.xml", "report.md"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	comment, err := os.ReadFile(filepath.Join(dir, "comment.md"))
	require.NoError(t, err)
	assert.Contains(t, string(comment), "````text\n"+answer+"\n````", "a fence longer than the answer's")
	assert.Contains(t, string(comment), "https://github.example/acme/widgets/actions/runs/42")
}

// TestCIGitHubBatch: a batch whose failures differ is "failed" of class
// "mixed", with an error annotation per failed job; no patch, no path.
func TestCIGitHubBatch(t *testing.T) {
	dir := t.TempDir()
	_, err := runrectest.Sample(filepath.Join(dir, "run"), os.DirFS("../.."), runrectest.Options{Hostile: true})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "patch.diff"), nil, 0o644))
	env := ghEnv(t)
	out := execute(t, "", env, "ci", "github", "--dir", dir, "--exit-code", "1")
	require.Equal(t, 0, out.code, out.stderr)
	o := readOutputs(t, env["GITHUB_OUTPUT"])
	assert.Equal(t, "failed", o["outcome"])
	assert.Equal(t, "mixed", o["class"])
	assert.Equal(t, "1", o["exit-code"])
	assert.Empty(t, o["patch-path"], "an empty patch is no patch")
	assert.Contains(t, out.stdout, "::error title=outpost job bad-login")
	assert.NotContains(t, out.stdout, "\n::error::injected", "a job's text cannot add annotations")
	text, err := os.ReadFile(o["text-path"])
	require.NoError(t, err)
	assert.Contains(t, string(text), "## fix-readme\n")
}

// TestCIGitHubNoRun: outpost stopped before it recorded anything (a
// configuration error): the outputs and the summary still say so.
func TestCIGitHubNoRun(t *testing.T) {
	dir := t.TempDir()
	env := ghEnv(t)
	out := execute(t, "", env, "ci", "github", "--dir", dir, "--exit-code", "2")
	require.Equal(t, 0, out.code, out.stderr)
	o := readOutputs(t, env["GITHUB_OUTPUT"])
	assert.Equal(t, "failed", o["outcome"])
	assert.Equal(t, string(outposterr.Configuration), o["class"])
	assert.Contains(t, out.stdout, "::error title=outpost::outpost exited 2 (configuration)")
	sum, err := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	require.NoError(t, err)
	assert.Contains(t, string(sum), "before it recorded a run")

	out = execute(t, "", map[string]string{}, "ci", "github", "--dir", dir)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "$GITHUB_STEP_SUMMARY is not set")
}

func prEvent(t *testing.T, n int) string {
	p := filepath.Join(t.TempDir(), "event.json")
	b, err := json.Marshal(map[string]any{"action": "synchronize", "pull_request": map[string]any{"number": n}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// TestCIComment: the first run posts one comment starting with the
// marker; the next edits it, however many comments come before it (the
// listing is paged); the token is sent, never printed.
func TestCIComment(t *testing.T) {
	const token = "ghs_secret-token-value"
	gh := newAuthorGitHub(token, "github-actions[bot]")
	defer gh.Close()
	for i := range 120 {
		gh.Seed(7, fmt.Sprintf("looks good %d", i))
	}
	gh.Seed(7, "quoting the bot: "+CommentMarker) // not at the start: not ours
	body := filepath.Join(t.TempDir(), "comment.md")
	env := map[string]string{"GITHUB_API_URL": gh.URL, "GITHUB_REPOSITORY": "acme/widgets",
		"GITHUB_EVENT_PATH": prEvent(t, 7), "OUTPOST_GITHUB_TOKEN": token}

	require.NoError(t, os.WriteFile(body, []byte("## first\n"), 0o644))
	out := execute(t, "", env, "ci", "comment", "--body-file", body)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "commented on pull request #7")
	require.NoError(t, os.WriteFile(body, []byte("## second\n"), 0o644))
	out = execute(t, "", env, "ci", "comment", "--body-file", body)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "updated comment")
	assert.NotContains(t, out.stdout+out.stderr, token)

	var ours []authorComment
	for _, c := range gh.Comments(7) {
		if strings.HasPrefix(c.Body, CommentMarker) {
			ours = append(ours, c)
		}
	}
	require.Len(t, ours, 1, "one comment, updated, not duplicated")
	assert.Equal(t, CommentMarker+"\n## second\n", ours[0].Body)
	assert.Len(t, gh.Comments(7), 122)
	calls := gh.Calls()
	assert.Equal(t, "POST /graphql", calls[0], "the token's identity first: %v", calls)
	assert.Equal(t, "POST /repos/acme/widgets/issues/7/comments", calls[3], "two pages listed, then the post: %v", calls)
	assert.Equal(t, fmt.Sprintf("PATCH /repos/acme/widgets/issues/comments/%d", ours[0].ID), calls[len(calls)-1])

	// A body over GitHub's limit is cut, on a character boundary.
	require.NoError(t, os.WriteFile(body, []byte("a"+strings.Repeat("é", 40000)), 0o644))
	out = execute(t, "", env, "ci", "comment", "--body-file", body)
	require.Equal(t, 0, out.code, out.stderr)
	long := ours[0].ID
	for _, c := range gh.Comments(7) {
		if c.ID == long {
			assert.Less(t, len([]rune(c.Body)), 65536)
			assert.True(t, utf8.ValidString(c.Body))
			assert.NotContains(t, c.Body, "\uFFFD")
			assert.Contains(t, c.Body, "(cut; the workflow run has the whole report)")
		}
	}

	// A token that cannot comment: a configuration error naming the permission.
	env["OUTPOST_GITHUB_TOKEN"] = "wrong"
	out = execute(t, "", env, "ci", "comment", "--body-file", body)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "pull-requests: write")

	// An event that is not a pull request: nothing is posted.
	push := filepath.Join(t.TempDir(), "push.json")
	require.NoError(t, os.WriteFile(push, []byte(`{"ref":"refs/heads/main"}`), 0o644))
	env["GITHUB_EVENT_PATH"], env["OUTPOST_GITHUB_TOKEN"] = push, token
	n := len(gh.Calls())
	out = execute(t, "", env, "ci", "comment", "--body-file", body)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "not a pull request")
	assert.Len(t, gh.Calls(), n)
}

// TestInitCIGitHub: init --ci github writes the safe pull-request
// workflow: pull_request (never pull_request_target) from the same
// repository only, the permissions it needs and no more, the configuration
// from the base branch kept outside the workspace, the key in the gateway,
// secrets only in the action's step, and inputs the action declares.
func TestInitCIGitHub(t *testing.T) {
	dir := t.TempDir()
	out := execute(t, "", nil, "init", "--dir", dir, "--ci", "github")
	require.Equal(t, 0, out.code, out.stderr)
	p := filepath.Join(dir, ".github", "workflows", "outpost.yml")
	assert.Contains(t, out.stdout, "created  "+p)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	type step struct {
		Name string            `yaml:"name"`
		ID   string            `yaml:"id"`
		If   string            `yaml:"if"`
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]string `yaml:"with"`
		Env  map[string]string `yaml:"env"`
	}
	var wf struct {
		On          map[string]any    `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			If    string `yaml:"if"`
			Steps []step `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	assert.Contains(t, wf.On, "pull_request")
	assert.Len(t, wf.On, 1, "pull_request only (no pull_request_target, no push)")
	assert.Equal(t, map[string]string{"contents": "read", "pull-requests": "write"}, wf.Permissions)
	require.Len(t, wf.Jobs, 1)
	job := wf.Jobs["outpost"]
	assert.Equal(t, "github.event.pull_request.head.repo.full_name == github.repository", job.If)

	action, err := actionrun.Load(filepath.Join("..", "..", "action.yml"))
	require.NoError(t, err)
	var op *step
	moved, prAt, trustedAt := false, -1, -1
	for i := range job.Steps {
		s := &job.Steps[i]
		for k, v := range s.Env {
			if strings.Contains(v, "secrets.") {
				assert.True(t, strings.HasPrefix(s.Uses, "outpost-dev/outpost@"), "secret %s in step %q", k, s.Name)
			}
		}
		switch {
		case strings.HasPrefix(s.Uses, "outpost-dev/outpost@"):
			op = s
		case strings.HasPrefix(s.Uses, "actions/checkout@") && s.With["ref"] == "${{ github.event.pull_request.base.sha }}":
			trustedAt = i
			assert.Equal(t, ".outpost", s.With["sparse-checkout"])
		case strings.HasPrefix(s.Uses, "actions/checkout@"):
			prAt = i
			assert.Equal(t, "false", s.With["persist-credentials"])
		case strings.Contains(s.Run, `"$RUNNER_TEMP/outpost-trusted"`):
			moved = trustedAt >= 0 && prAt < 0
		}
	}
	require.NotNil(t, op, "the workflow uses the action")
	assert.True(t, moved && trustedAt < prAt, "the base branch's configuration is moved out of the workspace before the pull request is checked out")
	assert.Equal(t, "gateway", op.With["credentials"])
	assert.Equal(t, "${{ runner.temp }}/outpost-trusted", op.With["working-directory"], "outpost runs from the trusted directory, outside the workspace")
	v, known := workflowVersion()
	assert.Equal(t, "outpost-dev/outpost@"+v, op.Uses)
	if !known {
		assert.Contains(t, out.stdout, "set the release to pin")
	}
	for k := range op.With {
		assert.Contains(t, action.Inputs, k, "the action declares input %s", k)
	}

	out = execute(t, "", nil, "init", "--dir", dir, "--ci", "github")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "kept     "+p)
	out = execute(t, "", nil, "init", "--dir", dir, "--ci", "gitlab")
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "--ci must be github")
}

// TestReadmeShowsTheWorkflow: the README's CI section shows the workflow
// init --ci github writes (pinned at v0.9.0 there), line for line.
func TestReadmeShowsTheWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	readme := string(b)
	start := strings.Index(readme, "```yaml\nname: outpost\n")
	require.GreaterOrEqual(t, start, 0, "the README's CI section shows the workflow")
	block := readme[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	code := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		return out
	}
	assert.Equal(t, code(strings.ReplaceAll(githubWorkflow, "{{VERSION}}", "v0.9.0")), code(block))
}
