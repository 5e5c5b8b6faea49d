package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/report"
)

// CommentMarker starts the one pull-request comment `outpost ci comment`
// keeps up to date: a later run finds the comment by it and edits it.
const CommentMarker = "<!-- outpost -->"

// maxCommentBytes keeps a comment under GitHub's limit (65,536 characters).
const maxCommentBytes = 60000

// NewCmdCI builds `outpost ci`, the commands the GitHub Action runs.
func NewCmdCI(f *Factory) *cobra.Command {
	ci := &cobra.Command{
		Use:   "ci",
		Short: "Publish a run to GitHub Actions: step summary, annotations, outputs, report files, one pull-request comment",
		Long: `ci holds what the Outpost GitHub Action (action.yml) runs after a turn or a batch:

  github    the step summary, annotations, outputs and report files of a run
  comment   one pull-request comment with the report, edited on later runs

They read the GITHUB_* variables GitHub Actions sets.`,
	}
	ci.AddCommand(newCmdCIGitHub(f), newCmdCIComment(f))
	return ci
}

func newCmdCIGitHub(f *Factory) *cobra.Command {
	var dir string
	var exitCode int
	cmd := &cobra.Command{
		Use:   "github --dir DIR --exit-code N",
		Short: "Write a run's step summary, annotations, outputs and report files",
		Long: `github publishes what the action's run step left in DIR: the run directory DIR/run
(written by --out) and DIR/patch.diff (what the agent changed in the workspace).

It writes DIR/report.md, DIR/report.html, DIR/junit.xml and DIR/text.md (the final
answer; a batch's under each job id) and DIR/comment.md (the pull-request comment's
body); appends the Markdown report to $GITHUB_STEP_SUMMARY; prints the annotations
(outpost report --format github); and writes the outputs outcome, class, exit-code,
text-path, patch-path, cost and report-dir to $GITHUB_OUTPUT. N is the run's exit
code. A run that stopped before it recorded anything (a configuration error) is
reported from its exit code.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return &flagError{errors.New("--dir is required: the directory the action's run step wrote")}
			}
			return runCIGitHub(f, dir, exitCode)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the report directory (holding run/ and patch.diff)")
	cmd.Flags().IntVar(&exitCode, "exit-code", 0, "the exit code of the outpost run or batch")
	return cmd
}

// ciResult is what the outputs say of a run.
type ciResult struct {
	outcome, class, cost string
}

func runCIGitHub(f *Factory, dir string, exitCode int) error {
	runDir := filepath.Join(dir, "run")
	res := ciResult{outcome: "ok", class: classOfExit(exitCode)}
	var md, text bytes.Buffer
	var rep *report.Report
	if _, err := os.Stat(runDir); err == nil {
		if rep, err = report.Load(runDir); err != nil {
			return err
		}
	}
	if rep == nil {
		fmt.Fprintf(&md, "## Outpost report\n\noutpost exited %d (%s) before it recorded a run: see the step's log.\n", exitCode, classOfExit(exitCode))
		fmt.Fprintf(f.IO.Out, "::error title=outpost::%s\n", ghCommandData(fmt.Sprintf("outpost exited %d (%s) before it recorded a run; see the log", exitCode, classOfExit(exitCode))))
	} else {
		if err := rep.Markdown(&md); err != nil {
			return err
		}
		if err := rep.GitHub(f.IO.Out); err != nil {
			return err
		}
		for name, format := range map[string]string{"report.html": "html", "junit.xml": "junit"} {
			var b bytes.Buffer
			if err := rep.Render(&b, format); err != nil {
				return err
			}
			if err := atomicfile.Write(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "write %s", name)
			}
		}
		classes := map[string]bool{}
		for i := range rep.Jobs {
			j := &rep.Jobs[i]
			if st := j.Status(); st != "ok" {
				classes[st] = true
			}
			if len(rep.Jobs) == 1 {
				text.WriteString(j.Outcome.Text)
			} else {
				fmt.Fprintf(&text, "## %s\n\n%s\n\n", j.ID, j.Outcome.Text)
			}
		}
		switch len(classes) {
		case 0:
		case 1:
			for c := range classes {
				res.class = c
			}
		default:
			res.class = "mixed"
		}
		if t := rep.Totals; t.CostUnknown < t.Jobs {
			res.cost = strconv.FormatFloat(t.CostUSD, 'f', -1, 64)
		}
	}
	if exitCode != 0 || res.class != "" {
		res.outcome = "failed"
		if res.class == "" {
			res.class = classOfExit(exitCode)
		}
	}
	write := func(name string, b []byte) (string, error) {
		p := filepath.Join(dir, name)
		if err := atomicfile.Write(p, b, 0o644); err != nil {
			return "", outposterr.Wrap(outposterr.Configuration, err, "write %s", name)
		}
		return p, nil
	}
	if _, err := write("report.md", md.Bytes()); err != nil {
		return err
	}
	textPath, err := write("text.md", text.Bytes())
	if err != nil {
		return err
	}
	patchPath := filepath.Join(dir, "patch.diff")
	if st, err := os.Stat(patchPath); err != nil || st.Size() == 0 {
		patchPath = ""
	}
	if _, err := write("comment.md", []byte(commentBody(md.String(), rep, f.Getenv))); err != nil {
		return err
	}
	if err := appendGitHubFile(f.Getenv, "GITHUB_STEP_SUMMARY", md.String()+"\n"); err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "report directory")
	}
	var out strings.Builder
	for _, kv := range [][2]string{{"outcome", res.outcome}, {"class", res.class}, {"exit-code", strconv.Itoa(exitCode)},
		{"text-path", textPath}, {"patch-path", patchPath}, {"cost", res.cost}, {"report-dir", absDir}} {
		out.WriteString(ghOutput(kv[0], kv[1]))
	}
	return appendGitHubFile(f.Getenv, "GITHUB_OUTPUT", out.String())
}

// commentBody is the pull-request comment: the Markdown report, a single
// turn's answer in a code block (so nothing in it renders or mentions
// anyone), and a link to the workflow run.
func commentBody(md string, rep *report.Report, getenv func(string) string) string {
	var b strings.Builder
	b.WriteString(md)
	if rep != nil && len(rep.Jobs) == 1 && rep.Jobs[0].Outcome.Text != "" {
		t := rep.Jobs[0].Outcome.Text
		if len(t) > maxCommentBytes/2 {
			t = strings.ToValidUTF8(t[:maxCommentBytes/2], "") + "\n…"
		}
		fence := strings.Repeat("`", max(3, longestRun(t, '`')+1))
		fmt.Fprintf(&b, "\n<details><summary>Answer</summary>\n\n%stext\n%s\n%s\n\n</details>\n", fence, t, fence)
	}
	if server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID"); server != "" && repo != "" && id != "" {
		fmt.Fprintf(&b, "\n[The workflow run](%s/%s/actions/runs/%s) has the HTML report and the JUnit file.\n", server, repo, url.PathEscape(id))
	}
	return b.String()
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// ghCommandData escapes a workflow command's message.
func ghCommandData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghOutput is one $GITHUB_OUTPUT entry in the delimited form, which holds
// any value.
func ghOutput(name, value string) string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	delim := "ghadelimiter_" + hex.EncodeToString(r[:])
	return name + "<<" + delim + "\n" + value + "\n" + delim + "\n"
}

// appendGitHubFile appends text to the file the variable names ($GITHUB_OUTPUT,
// $GITHUB_STEP_SUMMARY).
func appendGitHubFile(getenv func(string) string, variable, text string) error {
	p := getenv(variable)
	if p == "" {
		return outposterr.New(outposterr.Configuration, "$%s is not set: outpost ci github runs in a GitHub Actions step", variable)
	}
	fh, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "open $%s", variable)
	}
	_, werr := fh.WriteString(text)
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return outposterr.Wrap(outposterr.Configuration, werr, "write $%s", variable)
	}
	return nil
}

func newCmdCIComment(f *Factory) *cobra.Command {
	var bodyFile string
	var pr int
	cmd := &cobra.Command{
		Use:   "comment --body-file FILE [--pr N]",
		Short: "Post the report as one pull-request comment, or edit the one an earlier run posted",
		Long: `comment posts FILE as a comment on the pull request of the workflow's event
($GITHUB_EVENT_PATH; --pr N names another), starting with the hidden marker
` + CommentMarker + `. A comment of the pull request that starts with the marker and that the
token's identity wrote (github-actions[bot] for the workflow's token; asked of the GraphQL
API, $GITHUB_GRAPHQL_URL) is edited instead, so the pull request keeps one comment however
often the workflow runs; someone else's comment is never edited. The API is
$GITHUB_API_URL (default https://api.github.com; https only), the repository
$GITHUB_REPOSITORY, the token $OUTPOST_GITHUB_TOKEN (never printed); the workflow needs
the permission pull-requests: write. An event that is not a pull request posts
nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bodyFile == "" {
				return &flagError{errors.New("--body-file is required")}
			}
			return runCIComment(cmd.Context(), f, bodyFile, pr)
		},
	}
	cmd.Flags().StringVar(&bodyFile, "body-file", "", "the comment's Markdown")
	cmd.Flags().IntVar(&pr, "pr", 0, "the pull request's number (default: the event's)")
	return cmd
}

func runCIComment(ctx context.Context, f *Factory, bodyFile string, pr int) error {
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "read the comment body")
	}
	if pr == 0 {
		if pr, err = eventPullRequest(f.Getenv("GITHUB_EVENT_PATH")); err != nil {
			return err
		}
		if pr == 0 {
			fmt.Fprintln(f.IO.Out, "outpost: the event is not a pull request: no comment")
			return nil
		}
	}
	repo := f.Getenv("GITHUB_REPOSITORY")
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return outposterr.New(outposterr.Configuration, "$GITHUB_REPOSITORY must be OWNER/REPO, not %q", repo)
	}
	token := f.Getenv("OUTPOST_GITHUB_TOKEN")
	if token == "" {
		return outposterr.New(outposterr.Configuration, "$OUTPOST_GITHUB_TOKEN is not set: the action's github-token input gives it")
	}
	api := f.Getenv("GITHUB_API_URL")
	if api == "" {
		api = "https://api.github.com"
	}
	if err := checkAPIURL("GITHUB_API_URL", api); err != nil {
		return err
	}
	graphql := f.Getenv("GITHUB_GRAPHQL_URL")
	if graphql == "" {
		graphql = graphqlURL(api)
	} else if err := checkAPIURL("GITHUB_GRAPHQL_URL", graphql); err != nil {
		return err
	}
	text := string(body)
	if len(text) > maxCommentBytes {
		text = strings.ToValidUTF8(text[:maxCommentBytes], "") + "\n\n… (cut; the workflow run has the whole report)\n"
	}
	c := &commentClient{api: strings.TrimSuffix(api, "/"), graphql: graphql, token: token, owner: owner, repo: name,
		http: &http.Client{Timeout: time.Minute}}
	id, err := c.find(ctx, pr)
	if err != nil {
		return err
	}
	text = CommentMarker + "\n" + strings.TrimPrefix(text, CommentMarker+"\n")
	if id == 0 {
		if err := c.send(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/%s/issues/%d/comments", c.esc(owner), c.esc(name), pr), text); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.Out, "outpost: commented on pull request #%d\n", pr)
		return nil
	}
	if err := c.send(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/%s/issues/comments/%d", c.esc(owner), c.esc(name), id), text); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "outpost: updated comment %d on pull request #%d\n", id, pr)
	return nil
}

// checkAPIURL refuses an API URL the token must not be sent to: anything
// but https, except plain http to this machine (a test's fake API).
func checkAPIURL(variable, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return outposterr.New(outposterr.Configuration, "$%s must be an https URL, not %q", variable, raw)
	}
	switch {
	case strings.EqualFold(u.Scheme, "https"):
		return nil
	case strings.EqualFold(u.Scheme, "http"):
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return outposterr.New(outposterr.Configuration, "$%s must be an https URL (the token is sent to it), not %q", variable, raw)
}

// graphqlURL is the GraphQL endpoint beside the REST API api:
// https://api.github.com/graphql, or https://HOST/api/graphql for GitHub
// Enterprise Server's https://HOST/api/v3.
func graphqlURL(api string) string {
	api = strings.TrimSuffix(api, "/")
	if base, ok := strings.CutSuffix(api, "/api/v3"); ok {
		return base + "/api/graphql"
	}
	return api + "/graphql"
}

// eventPullRequest reads the pull request's number from a workflow event
// file (0: the event is not about a pull request).
func eventPullRequest(path string) (int, error) {
	if path == "" {
		return 0, outposterr.New(outposterr.Configuration, "$GITHUB_EVENT_PATH is not set: give --pr N")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, outposterr.Wrap(outposterr.Configuration, err, "read the workflow event")
	}
	var ev struct {
		PullRequest *struct {
			Number int `json:"number"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return 0, outposterr.Wrap(outposterr.Configuration, err, "read the workflow event %s", path)
	}
	if ev.PullRequest == nil {
		return 0, nil
	}
	return ev.PullRequest.Number, nil
}

// commentClient makes the two calls a comment needs: list the pull
// request's comments, then create or edit one.
type commentClient struct {
	api, graphql, token, owner, repo string
	http                             *http.Client
}

func (c *commentClient) esc(s string) string { return url.PathEscape(s) }

func (c *commentClient) do(ctx context.Context, method, path string, body io.Reader) ([]byte, error) {
	return c.call(ctx, method, c.api+path, path, body)
}

// call makes one request to target (shown as path in errors).
func (c *commentClient) call(ctx context.Context, method, target, path string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "GitHub API request")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Process, err, "GitHub API %s %s", method, path)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Process, err, "GitHub API %s %s", method, path)
	}
	switch {
	case resp.StatusCode/100 == 2:
		return b, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden &&
		(resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""):
		when := "later"
		if s := resp.Header.Get("Retry-After"); s != "" {
			when = "in " + s + "s"
		} else if n, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			when = "after " + time.Unix(n, 0).UTC().Format(time.RFC3339)
		}
		return nil, outposterr.New(outposterr.Process, "GitHub API %s %s: %s: rate limit exceeded: retry %s", method, path, resp.Status, when)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound:
		return nil, outposterr.New(outposterr.Configuration, "GitHub API %s %s: %s: the token cannot comment on this pull request (the workflow needs permissions: pull-requests: write; a pull request from a fork gets a read-only token)", method, path, resp.Status)
	}
	return nil, outposterr.New(outposterr.Process, "GitHub API %s %s: %s", method, path, resp.Status)
}

// issueComment is what a comment listing tells of each comment.
type issueComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"user"`
}

// viewer is the login of the token's identity (github-actions[bot] for a
// workflow's token), asked of the GraphQL API: the REST API's /user
// refuses an app's token.
func (c *commentClient) viewer(ctx context.Context) (string, error) {
	b, err := c.call(ctx, http.MethodPost, c.graphql, "graphql viewer", strings.NewReader(`{"query":"query { viewer { login } }"}`))
	if err != nil {
		return "", err
	}
	var r struct {
		Data struct {
			Viewer struct {
				Login string `json:"login"`
			} `json:"viewer"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Data.Viewer.Login == "" {
		return "", outposterr.New(outposterr.Process, "GitHub API: the token's identity (GraphQL viewer) could not be read")
	}
	return r.Data.Viewer.Login, nil
}

// ours reports whether the token's identity login wrote comment cm: a
// comment someone else wrote with the marker is never edited.
func (cm issueComment) ours(login string) bool {
	return cm.User.Login == login || cm.User.Type == "Bot" && !strings.HasSuffix(login, "[bot]") && cm.User.Login == login+"[bot]"
}

// find returns the id of the pull request's comment that starts with the
// marker and that the token's identity wrote (0: none), reading every page
// of comments.
func (c *commentClient) find(ctx context.Context, pr int) (int64, error) {
	login, err := c.viewer(ctx)
	if err != nil {
		return 0, err
	}
	for page := 1; ; page++ {
		b, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/repos/%s/%s/issues/%d/comments?per_page=100&page=%d", c.esc(c.owner), c.esc(c.repo), pr, page), nil)
		if err != nil {
			return 0, err
		}
		var list []issueComment
		if err := json.Unmarshal(b, &list); err != nil {
			return 0, outposterr.Wrap(outposterr.Process, err, "GitHub API: read the pull request's comments")
		}
		if i := slices.IndexFunc(list, func(c issueComment) bool { return strings.HasPrefix(c.Body, CommentMarker) && c.ours(login) }); i >= 0 {
			return list[i].ID, nil
		}
		if len(list) < 100 {
			return 0, nil
		}
	}
}

func (c *commentClient) send(ctx context.Context, method, path, text string) error {
	b, err := json.Marshal(map[string]string{"body": text})
	if err != nil {
		return outposterr.Wrap(outposterr.Internal, err, "encode the comment")
	}
	_, err = c.do(ctx, method, path, bytes.NewReader(b))
	return err
}
