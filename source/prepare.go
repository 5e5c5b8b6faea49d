package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Defaults for [Options] fields left zero.
const (
	// DefaultMaxBytes bounds the file bytes of one snapshot's tar stream.
	DefaultMaxBytes = 4 << 30
	// DefaultMaxEntries bounds the entries of one snapshot's tar stream.
	DefaultMaxEntries = 1 << 20
	// DefaultGitTimeout bounds one git command.
	DefaultGitTimeout = 10 * time.Minute
)

// Options configure a [Preparer]. Zero values are documented per field.
type Options struct {
	// TempDir is where snapshots are made (empty: os.TempDir()).
	TempDir string
	// Git is the git binary (empty: "git" looked up on PATH).
	Git string
	// MaxBytes and MaxEntries bound one snapshot's tar stream (0: the
	// defaults above).
	MaxBytes   int64
	MaxEntries int
	// GitTimeout bounds one git command (0: DefaultGitTimeout).
	GitTimeout time.Duration
	// SSHIdentity lets git fetch a repository over ssh as this user: with
	// the SSH keys and configuration in the user's home, which ssh reads
	// whatever HOME says. Off, ssh offers no key and reads no
	// configuration, so a repository named by a jobs file from elsewhere
	// cannot be fetched with the user's identity.
	SSHIdentity bool
	// Logger receives debug logs (nil: none).
	Logger *slog.Logger
}

// Preparer makes snapshots of sources on the host, each once, and removes
// them on Close. It is safe for concurrent use: concurrent requests for one
// source wait for the same preparation.
type Preparer struct {
	opts Options
	dir  string // private directory holding the snapshots

	mu     sync.Mutex
	snaps  map[string]*entry
	n      int
	closed bool
}

type entry struct {
	ready chan struct{}
	snap  *Snapshot
	err   error
}

// Snapshot is a prepared source: a directory on the host, read-only by
// convention, that is copied into each lease ([Snapshot.Tar]).
type Snapshot struct {
	// Source is the source it was made from.
	Source Spec
	// Dir is the host directory (the source's own directory for a dir
	// source).
	Dir string
	// Commit is the full id of the checked-out commit (git sources).
	Commit string
	max    int64
	maxN   int
}

// NewPreparer returns a preparer whose snapshots live in a new private
// directory under opts.TempDir.
func NewPreparer(opts Options) (*Preparer, error) {
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = DefaultGitTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp(opts.TempDir, "outpost-sources-")
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "create the source directory")
	}
	return &Preparer{opts: opts, dir: dir, snaps: map[string]*entry{}}, nil
}

// Prepare returns the snapshot of s, making it on first use. s must be
// valid ([Spec.Validate]).
func (p *Preparer) Prepare(ctx context.Context, s Spec) (*Snapshot, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, outposterr.New(outposterr.Configuration, "source preparer is closed")
	}
	e, ok := p.snaps[s.key()]
	if !ok {
		e = &entry{ready: make(chan struct{})}
		p.snaps[s.key()] = e
		p.n++
		n := p.n
		p.mu.Unlock()
		e.snap, e.err = p.make(ctx, s, n)
		if e.err != nil {
			// A failure is not cached: a cancelled preparation must not
			// poison the next job.
			p.mu.Lock()
			delete(p.snaps, s.key())
			p.mu.Unlock()
		}
		close(e.ready)
		return e.snap, e.err
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
		if outposterr.ClassOf(e.err) == outposterr.Aborted && ctx.Err() == nil {
			// The preparation this call waited for was cancelled, not this
			// one: try again.
			return p.Prepare(ctx, s)
		}
		return e.snap, e.err
	case <-ctx.Done():
		return nil, outposterr.Wrap(outposterr.Aborted, ctx.Err(), "prepare source %s", s)
	}
}

func (p *Preparer) make(ctx context.Context, s Spec, n int) (*Snapshot, error) {
	snap := &Snapshot{Source: s, max: p.opts.MaxBytes, maxN: p.opts.MaxEntries}
	if !s.Git() {
		// The named directory itself may be reached through a link the
		// user chose; nothing below it is followed.
		dir, err := filepath.EvalSymlinks(s.Dir)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "source dir")
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, outposterr.New(outposterr.Configuration, "source dir %s is not a directory", s.Dir)
		}
		if pseudo := pseudoFS(dir); pseudo != "" {
			return nil, outposterr.New(outposterr.Configuration,
				"source dir %s is inside %s, the kernel's view of the machine, not a project: name a project directory", s.Dir, pseudo)
		}
		snap.Dir = dir
		return snap, nil
	}
	if !isURL(s.Repo) {
		if fi, err := os.Stat(s.Repo); err != nil || !fi.IsDir() {
			return nil, outposterr.New(outposterr.Configuration, "source repo %s is not a directory", s.Repo)
		}
	}
	dir := filepath.Join(p.dir, fmt.Sprintf("git-%d", n))
	start := time.Now()
	commit, err := p.checkout(ctx, dir, s)
	if err != nil {
		_ = os.RemoveAll(dir)
		if ctx.Err() != nil {
			return nil, outposterr.Wrap(outposterr.Aborted, err, "prepare source %s", s)
		}
		return nil, outposterr.Wrap(outposterr.Configuration, err, "prepare source %s", s)
	}
	p.opts.Logger.Debug("source prepared", "source", s.String(), "commit", commit, "dir", dir, "took", time.Since(start))
	snap.Dir, snap.Commit = dir, commit
	return snap, nil
}

// pseudoFS returns the kernel file system (/proc, /sys, /dev) holding dir
// (links resolved), or "".
func pseudoFS(dir string) string {
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return d
		}
	}
	return ""
}

// checkout makes a shallow repository at s's commit in dir and returns
// the commit's full id.
func (p *Preparer) checkout(ctx context.Context, dir string, s Spec) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if _, err := p.git(ctx, dir, "init", "-q"); err != nil {
		return "", err
	}
	if _, err := p.git(ctx, dir, "fetch", "-q", "--depth=1", "--no-tags", "--no-recurse-submodules",
		"--end-of-options", s.Repo, s.Commit); err != nil {
		return "", err
	}
	out, err := p.git(ctx, dir, "rev-parse", "--verify", "-q", "FETCH_HEAD^{commit}")
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(out))
	if !fullID.MatchString(commit) {
		return "", fmt.Errorf("git rev-parse gave %q", commit)
	}
	if fullID.MatchString(s.Commit) && commit != s.Commit {
		return "", fmt.Errorf("fetched commit %s, not %s", commit, s.Commit)
	}
	if _, err := p.git(ctx, dir, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit); err != nil {
		return "", err
	}
	// The lease's repository needs no remote and no fetch state.
	for _, f := range []string{"FETCH_HEAD", "ORIG_HEAD"} {
		_ = os.Remove(filepath.Join(dir, ".git", f))
	}
	return commit, nil
}

// git runs git in dir with a private, minimal environment and returns its
// standard output. Errors carry a bounded tail of its standard error.
func (p *Preparer) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	bin := p.opts.Git
	if bin == "" {
		bin = "git"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "git sources need git on this machine")
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.GitTimeout)
	defer cancel()
	argv := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never",
		"-c", "protocol.file.allow=always", "-c", "protocol.https.allow=always", "-c", "protocol.http.allow=always",
		"-c", "protocol.ssh.allow=always", "-c", "protocol.git.allow=always", "-c", "core.fsmonitor=false"}, args...)
	cmd := exec.CommandContext(ctx, path, argv...)
	cmd.Dir = dir
	cmd.Env = gitEnv(p.dir, filepath.Dir(path))
	if !p.opts.SSHIdentity {
		cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND="+anonymousSSH)
	}
	cmd.WaitDelay = 5 * time.Second
	ownGroup(cmd)
	var stdout bytes.Buffer
	stderr := &tailWriter{max: 4 << 10}
	cmd.Stdout = &limitWriter{w: &stdout, n: 1 << 20}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return nil, fmt.Errorf("git %s: %w", args[0], err)
		}
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// anonymousSSH is the ssh git runs without Options.SSHIdentity: no
// configuration file (so no IdentityFile or ProxyCommand of the user's), no
// key, no agent, no prompt.
const anonymousSSH = "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityFile=none -o IdentityAgent=none"

// gitEnv is git's whole environment: nothing of the process's (no
// GIT_DIR, no credentials helpers configured globally, no askpass).
func gitEnv(home, gitDir string) []string {
	return []string{
		"PATH=" + gitDir + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_ALLOW_PROTOCOL=file:https:http:ssh:git",
		"GIT_AUTHOR_NAME=outpost", "GIT_AUTHOR_EMAIL=outpost@localhost",
		"GIT_COMMITTER_NAME=outpost", "GIT_COMMITTER_EMAIL=outpost@localhost",
	}
}

// Close removes every snapshot the preparer made (never a dir source's
// directory). Idempotent.
func (p *Preparer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := os.RemoveAll(p.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return outposterr.Wrap(outposterr.Sandbox, err, "remove prepared sources")
	}
	return nil
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return string(t.b) }

// limitWriter passes on at most n bytes and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	k := len(p)
	if l.n <= 0 {
		return k, nil
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	l.n -= len(p)
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	return k, nil
}
