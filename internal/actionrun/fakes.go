package actionrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Release writes a release as the action downloads it — DIR/VERSION/ASSET
// for each asset and DIR/VERSION/SHA256SUMS in sha256sum's format — and
// returns DIR.
func Release(dir, version string, assets map[string][]byte) (string, error) {
	vd := filepath.Join(dir, version)
	if err := os.MkdirAll(vd, 0o755); err != nil {
		return "", err
	}
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	sort.Strings(names)
	var sums strings.Builder
	for _, n := range names {
		sum := sha256.Sum256(assets[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), n)
		if err := os.WriteFile(filepath.Join(vd, n), assets[n], 0o644); err != nil {
			return "", err
		}
	}
	return dir, os.WriteFile(filepath.Join(vd, "SHA256SUMS"), []byte(sums.String()), 0o644)
}

// FileServer serves dir on 127.0.0.1 (a release host). Close it when done.
func FileServer(dir string) *httptest.Server {
	return httptest.NewServer(http.FileServer(http.Dir(dir)))
}

// Comment is a pull-request comment held by FakeGitHub.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User User   `json:"user"`
}

// User is a comment's author.
type User struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// FakeLogin is the token's identity in FakeGitHub (GraphQL viewer), the
// author of the comments it posts.
const FakeLogin = "github-actions[bot]"

// FakeGitHub fakes the GitHub REST calls a pull-request comment needs:
// GET /repos/O/R/issues/N/comments (paged), POST the same path, and
// PATCH /repos/O/R/issues/comments/ID, and the GraphQL viewer (POST
// /graphql: [FakeLogin]). It checks the bearer token.
type FakeGitHub struct {
	*httptest.Server
	Token string

	mu       sync.Mutex
	comments map[int][]*Comment // by issue number
	next     int64
	// Calls lists the requests, "METHOD PATH".
	calls []string
}

var (
	listRe  = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/([0-9]+)/comments$`)
	patchRe = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/comments/([0-9]+)$`)
)

// NewFakeGitHub starts the fake API on 127.0.0.1 for repository owner/repo.
// Seed comments (by other people) may be given for issue n.
func NewFakeGitHub(token, owner, repo string) *FakeGitHub {
	g := &FakeGitHub{Token: token, comments: map[int][]*Comment{}, next: 1000}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls = append(g.calls, r.Method+" "+r.URL.Path)
		if r.Header.Get("Authorization") != "Bearer "+g.Token {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/graphql" && r.Method == http.MethodPost {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"viewer": map[string]string{"login": FakeLogin}}})
			return
		}
		if m := listRe.FindStringSubmatch(r.URL.Path); m != nil && m[1] == owner && m[2] == repo {
			n, _ := strconv.Atoi(m[3])
			switch r.Method {
			case http.MethodGet:
				per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
				if per <= 0 {
					per = 30
				}
				page, _ := strconv.Atoi(r.URL.Query().Get("page"))
				page = max(page, 1)
				all := g.comments[n]
				lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
				_ = json.NewEncoder(w).Encode(all[lo:hi])
			case http.MethodPost:
				var in Comment
				if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
					http.Error(w, `{"message":"body is required"}`, http.StatusUnprocessableEntity)
					return
				}
				g.next++
				c := &Comment{ID: g.next, Body: in.Body, User: User{Login: FakeLogin, Type: "Bot"}}
				g.comments[n] = append(g.comments[n], c)
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(c)
			default:
				http.Error(w, "method", http.StatusMethodNotAllowed)
			}
			return
		}
		if m := patchRe.FindStringSubmatch(r.URL.Path); m != nil && m[1] == owner && m[2] == repo && r.Method == http.MethodPatch {
			id, _ := strconv.ParseInt(m[3], 10, 64)
			var in Comment
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
				http.Error(w, `{"message":"body is required"}`, http.StatusUnprocessableEntity)
				return
			}
			for _, cs := range g.comments {
				for _, c := range cs {
					if c.ID == id {
						c.Body = in.Body
						_ = json.NewEncoder(w).Encode(c)
						return
					}
				}
			}
		}
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}))
	return g
}

// Seed adds a comment to issue n as if someone had posted it.
func (g *FakeGitHub) Seed(n int, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	g.comments[n] = append(g.comments[n], &Comment{ID: g.next, Body: body, User: User{Login: "someone", Type: "User"}})
}

// Comments returns issue n's comments.
func (g *FakeGitHub) Comments(n int) []Comment {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Comment, 0, len(g.comments[n]))
	for _, c := range g.comments[n] {
		out = append(out, *c)
	}
	return out
}

// Calls returns the requests so far, "METHOD PATH".
func (g *FakeGitHub) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}
