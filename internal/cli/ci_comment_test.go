package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authorGitHub is a fake comment API that knows who wrote each comment: the
// token's identity (GraphQL viewer) writes, seeded comments are others'.
type authorGitHub struct {
	*httptest.Server
	token, login string
	mu           sync.Mutex
	comments     []*authorComment
	next         int64
	calls        []string
	// fail, when set, answers every REST call.
	fail func(w http.ResponseWriter) bool
}

type authorUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type authorComment struct {
	ID   int64      `json:"id"`
	Body string     `json:"body"`
	User authorUser `json:"user"`
}

var (
	authorList  = regexp.MustCompile(`^/repos/acme/widgets/issues/7/comments$`)
	authorPatch = regexp.MustCompile(`^/repos/acme/widgets/issues/comments/([0-9]+)$`)
)

func newAuthorGitHub(token, login string) *authorGitHub {
	g := &authorGitHub{token: token, login: login, next: 100}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls = append(g.calls, r.Method+" "+r.URL.Path)
		if r.Header.Get("Authorization") != "Bearer "+g.token {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/graphql" && r.Method == http.MethodPost {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"viewer": map[string]string{"login": g.login}}})
			return
		}
		if g.fail != nil && g.fail(w) {
			return
		}
		if authorList.MatchString(r.URL.Path) {
			switch r.Method {
			case http.MethodGet:
				per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
				if per <= 0 {
					per = 30
				}
				page, _ := strconv.Atoi(r.URL.Query().Get("page"))
				page = max(page, 1)
				lo, hi := min((page-1)*per, len(g.comments)), min(page*per, len(g.comments))
				_ = json.NewEncoder(w).Encode(g.comments[lo:hi])
			case http.MethodPost:
				var in authorComment
				_ = json.NewDecoder(r.Body).Decode(&in)
				g.next++
				c := &authorComment{ID: g.next, Body: in.Body, User: authorUser{Login: g.login, Type: "Bot"}}
				g.comments = append(g.comments, c)
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(c)
			}
			return
		}
		if m := authorPatch.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPatch {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			var in authorComment
			_ = json.NewDecoder(r.Body).Decode(&in)
			for _, c := range g.comments {
				if c.ID == id {
					// A token that may write pull requests may edit anyone's comment.
					c.Body = in.Body
					_ = json.NewEncoder(w).Encode(c)
					return
				}
			}
		}
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}))
	return g
}

func (g *authorGitHub) seed(login, body string) *authorComment {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	c := &authorComment{ID: g.next, Body: body, User: authorUser{Login: login, Type: "User"}}
	g.comments = append(g.comments, c)
	return c
}

func (g *authorGitHub) snapshot() []authorComment {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []authorComment
	for _, c := range g.comments {
		out = append(out, *c)
	}
	return out
}

func commentEnv(t *testing.T, api, token string) (map[string]string, string) {
	body := filepath.Join(t.TempDir(), "comment.md")
	require.NoError(t, os.WriteFile(body, []byte("## report\n"), 0o644))
	return map[string]string{"GITHUB_API_URL": api, "GITHUB_REPOSITORY": "acme/widgets",
		"GITHUB_EVENT_PATH": prEvent(t, 7), "OUTPOST_GITHUB_TOKEN": token}, body
}

// TestCICommentPlantedMarker: a comment someone else wrote that starts with
// the marker is not outpost's: it is left as it is, and outpost posts and
// then edits its own comment (the token's identity's).
func TestCICommentPlantedMarker(t *testing.T) {
	const token = "ghs_secret-token-value"
	gh := newAuthorGitHub(token, "github-actions[bot]")
	defer gh.Close()
	planted := gh.seed("mallory", CommentMarker+"\nnothing to see here")
	env, body := commentEnv(t, gh.URL, token)

	for run := range 2 {
		out := execute(t, "", env, "ci", "comment", "--body-file", body)
		require.Equal(t, 0, out.code, out.stderr)
		assert.NotContains(t, out.stdout+out.stderr, token)
		cs := gh.snapshot()
		require.Len(t, cs, 2, "run %d: the planted comment and outpost's own", run)
		assert.Equal(t, planted.Body, cs[0].Body, "run %d: someone else's comment is never edited", run)
		assert.Equal(t, "github-actions[bot]", cs[1].User.Login)
		assert.Equal(t, CommentMarker+"\n## report\n", cs[1].Body)
	}
}

// TestCICommentRateLimit: a rate-limited API is reported as a rate limit
// (not as a missing permission), a process error.
func TestCICommentRateLimit(t *testing.T) {
	const token = "ghs_secret-token-value"
	gh := newAuthorGitHub(token, "github-actions[bot]")
	defer gh.Close()
	gh.fail = func(w http.ResponseWriter) bool {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "1893456000")
		http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusForbidden)
		return true
	}
	env, body := commentEnv(t, gh.URL, token)
	out := execute(t, "", env, "ci", "comment", "--body-file", body)
	assert.Equal(t, int(ExitProcess), out.code, out.stderr)
	assert.Contains(t, out.stderr, "rate limit")
	assert.NotContains(t, out.stderr, "pull-requests: write", "a rate limit is not a missing permission")
	assert.NotContains(t, out.stdout+out.stderr, token)
}

// TestCICommentRefusesPlainHTTP: the token is sent only over https (plain
// http only to this machine, as a test's fake API): an http API URL
// elsewhere is a configuration error before any request.
func TestCICommentRefusesPlainHTTP(t *testing.T) {
	const token = "ghs_secret-token-value"
	env, body := commentEnv(t, "http://api.github.invalid", token)
	out := execute(t, "", env, "ci", "comment", "--body-file", body)
	assert.Equal(t, int(ExitConfiguration), out.code, out.stderr)
	assert.Contains(t, out.stderr, "GITHUB_API_URL")
	assert.Contains(t, out.stderr, "https")
	assert.NotContains(t, out.stdout+out.stderr, token)
}

// Seed, Comments and Calls give authorGitHub actionrun.FakeGitHub's shape
// (one pull request, #7): Seed's comments are someone else's.
func (g *authorGitHub) Seed(n int, body string) { g.seed("someone", body) }

func (g *authorGitHub) Comments(int) []authorComment { return g.snapshot() }

func (g *authorGitHub) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}
