// Package source makes task workspaces: the directory a batch job's agent
// works in, made fresh for every job and attempt from a source the job
// names, and copied into the lease through the sandbox contract
// (Sandbox.CopyIn) so that the same job runs the same way on an engine that
// is not on this machine.
//
// A source is a git repository at a commit ([Spec.Repo] and [Spec.Commit]:
// a local path or a URL, and a full commit id or a ref name) or a plain
// directory ([Spec.Dir], copied as it is). A [Preparer] turns a source into
// a [Snapshot] on the host, once per source for the life of the preparer:
//
//   - a git source is fetched with the git binary, shallow (depth 1, the
//     commit's tree only, objects copied from a local repository by git's
//     own local transport) into a private directory, and checked out
//     detached at the commit. Every attempt of every job with the same
//     repository and commit shares that one snapshot; each lease gets its
//     own copy of it. The agent sees a git repository whose HEAD is the
//     commit (one commit of history), so `git diff` and `git status` work
//     and the harness can collect the patch of what the agent changed.
//   - a directory source is read in place, at copy time; it is never
//     written.
//
// [Snapshot.Tar] streams a snapshot as a tar archive. It never follows a
// symbolic link (links travel as links; the sandbox's extraction refuses
// ones that leave the workspace), skips the top-level .outpost directory
// (project configuration and .env values never reach a lease this way),
// refuses special files, and stops at [Options.MaxBytes] bytes and
// [Options.MaxEntries] entries.
//
// Why not `git clone --shared` per attempt: a lease's copy must stand on
// its own (a remote engine cannot follow alternates to this machine's
// object store), so sharing happens one level up — one shallow snapshot per
// repository and commit, shared by every attempt of every job that names
// it, each lease receiving its own copy of it. The patch is computed by
// git inside the lease, never by git on the host over a workspace an agent
// controlled (its configuration could name programs to run).
//
// Git runs on the host as an argv (never a shell) with an environment of
// its own: no system or global configuration, no terminal prompts, hooks
// disabled, and only the file, https, http, ssh and git transports.
// Repositories are hostile input: every path and ref is validated before
// it reaches git, and no ref can be taken for an option.
package source

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// Spec names where a job's workspace comes from: Repo (with Commit) or Dir.
type Spec struct {
	// Repo is a git repository: a local path or a URL (https, http, ssh,
	// git or file).
	Repo string `json:"repo,omitempty"`
	// Commit is the commit to check out: a full commit id (40 or 64 hex
	// digits) or a ref name (a branch or tag) fetched as it is now.
	Commit string `json:"commit,omitempty"`
	// Dir is a directory copied as it is.
	Dir string `json:"dir,omitempty"`
}

// Git reports whether s is a git source.
func (s Spec) Git() bool { return s.Repo != "" }

// String names the source for messages.
func (s Spec) String() string {
	if s.Git() {
		return s.Repo + "@" + s.Commit
	}
	return s.Dir
}

var (
	fullID = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	// refName is a conservative subset of git check-ref-format: components
	// of letters, digits and ._-/ that cannot start with '-' or '.'.
	refName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*$`)
	schemes = map[string]bool{"https": true, "http": true, "ssh": true, "git": true, "file": true}
)

// maxField bounds every field of a source.
const maxField = 4096

// Validate checks s: exactly one of Repo and Dir, a commit for a repository
// (a full id or a plain ref name), local paths absolute (see [Spec.Resolve])
// and URLs of the allowed schemes. Nothing may start with '-'.
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "source: "+format, args...)
	}
	for _, f := range []string{s.Repo, s.Commit, s.Dir} {
		if len(f) > maxField || strings.ContainsAny(f, "\x00\n\r") {
			return bad("a field is too long or holds control characters")
		}
		if strings.HasPrefix(f, "-") {
			return bad("%q starts with '-'", f)
		}
	}
	switch {
	case s.Repo == "" && s.Dir == "":
		return bad("give repo (with commit) or dir")
	case s.Repo != "" && s.Dir != "":
		return bad("give repo or dir, not both")
	case s.Dir != "":
		if s.Commit != "" {
			return bad("commit applies to repo, not dir")
		}
		if !filepath.IsAbs(s.Dir) {
			return bad("dir %q is not absolute", s.Dir)
		}
		return nil
	}
	if s.Commit == "" {
		return bad("repo %s needs a commit", s.Repo)
	}
	if !fullID.MatchString(s.Commit) && (!refName.MatchString(s.Commit) || strings.Contains(s.Commit, "..") ||
		strings.HasSuffix(s.Commit, ".lock") || strings.HasSuffix(s.Commit, ".")) {
		return bad("commit %q is neither a full commit id nor a plain ref name", s.Commit)
	}
	if isURL(s.Repo) {
		u, err := url.Parse(s.Repo)
		if err != nil || !schemes[strings.ToLower(u.Scheme)] || (u.Host == "" && u.Scheme != "file") {
			return bad("repo %q: only https, http, ssh, git and file URLs", s.Repo)
		}
		return nil
	}
	if !filepath.IsAbs(s.Repo) {
		return bad("repo %q is neither a URL nor an absolute path", s.Repo)
	}
	return nil
}

// isURL reports whether repo is written as a URL (scheme://...).
func isURL(repo string) bool {
	i := strings.Index(repo, "://")
	return i > 0 && !strings.ContainsAny(repo[:i], "/\\")
}

// Resolve returns s with relative local paths made absolute against base
// (a jobs file's directory). URLs stay as they are.
func (s Spec) Resolve(base string) Spec {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "-") {
			return p
		}
		return filepath.Join(base, p)
	}
	if s.Repo != "" && !isURL(s.Repo) {
		s.Repo = abs(s.Repo)
	}
	s.Dir = abs(s.Dir)
	return s
}

// key identifies a snapshot.
func (s Spec) key() string { return fmt.Sprintf("%q %q %q", s.Repo, s.Commit, s.Dir) }
