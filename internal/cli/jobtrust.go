package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// jobTrust is what the jobs of one jobs file may reach on this machine:
// the directories their paths may resolve into (the jobs file's own
// directory and every --allow-path) and the host variables their env may
// forward (every --allow-env and --env). A jobs file from elsewhere can
// then name nothing the command line did not hand it.
type jobTrust struct {
	// base is the directory relative paths resolve against (the jobs
	// file's, or the current directory for standard input).
	base string
	// roots are base and the allowed directories, links resolved.
	roots []string
	// rootsHelp names the roots for messages.
	rootsHelp string
	env       map[string]bool
}

// newJobTrust checks the command line's allowances. base is where the jobs
// come from (baseHelp names it: "the jobs file's directory", …).
func newJobTrust(base, baseHelp string, allowPaths, allowEnv, forwarded []string) (*jobTrust, error) {
	t := &jobTrust{base: base, env: map[string]bool{}}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "jobs: %s", baseHelp)
	}
	t.roots = append(t.roots, real)
	t.rootsHelp = baseHelp + " (" + base + ")"
	for _, p := range allowPaths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, &flagError{fmt.Errorf("--allow-path %s: %w", p, err)}
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, &flagError{fmt.Errorf("--allow-path %s: %w", p, err)}
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return nil, &flagError{fmt.Errorf("--allow-path %s is not a directory", p)}
		}
		if real == string(filepath.Separator) {
			// Allowed, but never by accident: it must be written as "/".
			if filepath.Clean(abs) != string(filepath.Separator) {
				return nil, &flagError{fmt.Errorf("--allow-path %s resolves to the root directory: write --allow-path / if you mean every path", p)}
			}
		}
		t.roots = append(t.roots, real)
	}
	if len(allowPaths) > 0 {
		t.rootsHelp += " and --allow-path " + strings.Join(allowPaths, ", ")
	}
	for _, name := range allowEnv {
		switch {
		case !sandbox.ValidEnvName(name):
			return nil, &flagError{fmt.Errorf("--allow-env takes variable names, not %q (values never go on the command line)", credentials.ShownName(name))}
		case credentials.Reserved(name):
			return nil, &flagError{fmt.Errorf("--allow-env %s: the name is reserved (Outpost or the sandbox sets it, or it loads other code)", name)}
		}
		t.env[name] = true
	}
	for _, name := range forwarded {
		t.env[name] = true
	}
	return t, nil
}

// resolve makes a job's relative paths absolute against the base, and
// every local path clean: the path checked is the path used.
func (t *jobTrust) resolve(j *batch.Job) {
	if j.Workspace != "" {
		if !filepath.IsAbs(j.Workspace) {
			j.Workspace = filepath.Join(t.base, j.Workspace)
		}
		j.Workspace = filepath.Clean(j.Workspace)
	}
	if j.Source != nil {
		s := j.Source.Resolve(t.base)
		if s.Dir != "" && filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Clean(s.Dir)
		}
		if p, local := localRepo(s.Repo); local && p == s.Repo && filepath.IsAbs(p) {
			s.Repo = filepath.Clean(p)
		}
		j.Source = &s
	}
	if j.Verify != nil && j.Verify.Files != "" {
		v := *j.Verify
		if !filepath.IsAbs(v.Files) {
			v.Files = filepath.Join(t.base, v.Files)
		}
		v.Files = filepath.Clean(v.Files)
		j.Verify = &v
	}
	if e := j.Environment; e != nil {
		abs := func(p string) string {
			if p == "" {
				return ""
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(t.base, p)
			}
			return filepath.Clean(p)
		}
		j.Environment = &batch.EnvironmentSpec{Dockerfile: abs(e.Dockerfile), Context: abs(e.Context)}
	}
}

// check refuses a job that names a host path outside the roots or a
// variable the command line did not allow. where names the job for
// messages ("jobs.jsonl line 3").
func (t *jobTrust) check(j *batch.Job, where string) error {
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "%s: job %q: "+format, append([]any{where, j.ID}, args...)...)
	}
	type field struct{ name, path string }
	var paths []field
	if j.Workspace != "" {
		paths = append(paths, field{"workspace", j.Workspace})
	}
	if s := j.Source; s != nil {
		if s.Dir != "" {
			paths = append(paths, field{"source.dir", s.Dir})
		}
		if p, local := localRepo(s.Repo); local {
			paths = append(paths, field{"source.repo", p})
		}
	}
	if j.Verify != nil && j.Verify.Files != "" {
		paths = append(paths, field{"verify.files", j.Verify.Files})
	}
	if e := j.Environment; e != nil {
		if e.Context != "" {
			paths = append(paths, field{"environment.context", e.Context})
		}
		if e.Dockerfile != "" {
			paths = append(paths, field{"environment.dockerfile", e.Dockerfile})
		}
	}
	for _, f := range paths {
		real, err := resolveExisting(f.path)
		if err != nil {
			return bad("%s %s: %v", f.name, f.path, err)
		}
		if !t.inside(real) {
			shown := f.path
			if real != filepath.Clean(f.path) {
				shown += " (" + real + ")"
			}
			return bad("%s %s is outside %s: a jobs file reaches only what the command line allows; pass --allow-path %s to allow it",
				f.name, shown, t.rootsHelp, filepath.Dir(real))
		}
	}
	for _, name := range j.Env {
		if !t.env[name] {
			return bad("env %s is not allowed by the command line: pass --allow-env %s to let jobs forward it (or --env %s to forward it to every job)",
				name, name, name)
		}
	}
	return nil
}

// checkFile refuses a file whose content becomes part of a job (a task's
// instruction.md and task.json) when it resolves, links and ".." included,
// outside the roots: a link to a host file would hand its content to the
// agent as the prompt. where names the task for messages.
func (t *jobTrust) checkFile(p, where string) error {
	real, err := resolveExisting(p)
	if err != nil {
		return outposterr.New(outposterr.Configuration, "%s: %s: %v", where, filepath.Base(p), err)
	}
	if !t.inside(real) {
		return outposterr.New(outposterr.Configuration, "%s: %s %s (%s) is outside %s: a task reaches only what the command line allows; pass --allow-path %s to allow it",
			where, filepath.Base(p), p, real, t.rootsHelp, filepath.Dir(real))
	}
	return nil
}

// inside reports whether real is one of the roots or below one.
func (t *jobTrust) inside(real string) bool {
	for _, r := range t.roots {
		if rel, err := filepath.Rel(r, real); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return true
		}
	}
	return false
}

// localRepo returns the host path a repository names: a local path, or the
// path of a file:// URL; local is false for a remote URL.
func localRepo(repo string) (string, bool) {
	if repo == "" {
		return "", false
	}
	i := strings.Index(repo, "://")
	if i <= 0 || strings.ContainsAny(repo[:i], "/\\") {
		return repo, true
	}
	u, err := url.Parse(repo)
	if err != nil || !strings.EqualFold(u.Scheme, "file") {
		return "", false
	}
	return u.Path, true
}

// resolveExisting resolves p's links and ".." components: fully when p
// exists, else its longest existing ancestor with the rest joined (the
// step that uses p says that it is missing).
func resolveExisting(p string) (string, error) {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return "", errors.New("not an absolute path")
	}
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
