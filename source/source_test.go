package source_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

// gitRepo makes a repository with two commits and returns its path and the
// commit ids (oldest first).
func gitRepo(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
	run("add", "-A")
	run("commit", "-qm", "one")
	first := run("rev-parse", "HEAD")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644))
	run("commit", "-qam", "two")
	second := run("rev-parse", "HEAD")
	return dir, []string{first, second}
}

func entries(t *testing.T, r io.ReadCloser) (map[string]string, error) {
	t.Helper()
	defer r.Close()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		case tar.TypeDir:
			out[h.Name] = "dir"
		default:
			b, err := io.ReadAll(tr)
			if err != nil {
				return out, err
			}
			out[h.Name] = string(b)
		}
	}
}

func TestValidate(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name string
		s    source.Spec
		ok   bool
	}{
		{"repo at id", source.Spec{Repo: "/r", Commit: sha}, true},
		{"repo at sha256 id", source.Spec{Repo: "/r", Commit: strings.Repeat("b", 64)}, true},
		{"repo at branch", source.Spec{Repo: "/r", Commit: "release/1.2"}, true},
		{"https url", source.Spec{Repo: "https://example.invalid/x.git", Commit: sha}, true},
		{"dir", source.Spec{Dir: "/d"}, true},
		{"neither", source.Spec{}, false},
		{"both", source.Spec{Repo: "/r", Commit: sha, Dir: "/d"}, false},
		{"no commit", source.Spec{Repo: "/r"}, false},
		{"commit on dir", source.Spec{Dir: "/d", Commit: sha}, false},
		{"option as commit", source.Spec{Repo: "/r", Commit: "--upload-pack=touch /tmp/x"}, false},
		{"option as repo", source.Spec{Repo: "--upload-pack=x", Commit: sha}, false},
		{"option as dir", source.Spec{Dir: "-rf"}, false},
		{"refspec", source.Spec{Repo: "/r", Commit: "+refs/heads/x:refs/heads/y"}, false},
		{"range", source.Spec{Repo: "/r", Commit: "a..b"}, false},
		{"ext transport", source.Spec{Repo: "ext::sh -c touch% /tmp/pwned", Commit: sha}, false},
		{"unknown scheme", source.Spec{Repo: "fd::17", Commit: sha}, false},
		{"relative repo", source.Spec{Repo: "repo", Commit: sha}, false},
		{"relative dir", source.Spec{Dir: "d"}, false},
		{"newline", source.Spec{Repo: "/r", Commit: "main\n--x"}, false},
		{"upper-case id is a ref", source.Spec{Repo: "/r", Commit: strings.Repeat("A", 40)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		})
	}
}

func TestResolve(t *testing.T) {
	s := source.Spec{Repo: "tasks/r1", Commit: "main"}.Resolve("/jobs")
	assert.Equal(t, "/jobs/tasks/r1", s.Repo)
	assert.Equal(t, "https://h/r", source.Spec{Repo: "https://h/r"}.Resolve("/jobs").Repo)
	assert.Equal(t, "/abs", source.Spec{Dir: "/abs"}.Resolve("/jobs").Dir)
	assert.Equal(t, "/jobs/d", source.Spec{Dir: "d"}.Resolve("/jobs").Dir)
}

func TestPrepareGit(t *testing.T) {
	repo, ids := gitRepo(t)
	before := snapshotTree(t, repo)
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	// The older commit, by id: its tree, a repository whose HEAD is it.
	var wg sync.WaitGroup
	snaps := make([]*source.Snapshot, 4)
	for i := range snaps {
		wg.Go(func() {
			s, err := p.Prepare(ctx, source.Spec{Repo: repo, Commit: ids[0]})
			assert.NoError(t, err)
			snaps[i] = s
		})
	}
	wg.Wait()
	s := snaps[0]
	require.NotNil(t, s)
	for _, o := range snaps[1:] {
		assert.Same(t, s, o, "one snapshot per source, shared")
	}
	assert.Equal(t, ids[0], s.Commit)
	got, err := entries(t, s.Tar(ctx))
	require.NoError(t, err)
	assert.Equal(t, "one\n", got["a.txt"])
	assert.Equal(t, "-> a.txt", got["link"], "links travel as links")
	assert.Contains(t, got, ".git/HEAD")
	assert.Contains(t, got[".git/HEAD"], ids[0])

	// A branch name resolves to its tip.
	s2, err := p.Prepare(ctx, source.Spec{Repo: repo, Commit: "main"})
	require.NoError(t, err)
	assert.Equal(t, ids[1], s2.Commit)

	// A commit the repository does not have.
	_, err = p.Prepare(ctx, source.Spec{Repo: repo, Commit: strings.Repeat("0", 40)})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)

	// The source repository is unchanged; Close removes the snapshots.
	assert.Equal(t, before, snapshotTree(t, repo))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = os.Stat(s.Dir)
	assert.True(t, os.IsNotExist(err))
	_, err = p.Prepare(ctx, source.Spec{Repo: repo, Commit: "main"})
	assert.Error(t, err)
}

// snapshotTree lists every path of dir with its size and mode.
func snapshotTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + " " + fi.ModTime().String() + "\n")
		return nil
	}))
	return b.String()
}

func TestPrepareNotARepo(t *testing.T) {
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Prepare(context.Background(), source.Spec{Repo: t.TempDir(), Commit: "main"})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	_, err = p.Prepare(context.Background(), source.Spec{Repo: "/nonexistent/repo", Commit: "main"})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}

func TestDirSource(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o640))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".outpost"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".outpost", ".env"), []byte("SECRET=marker"), 0o600))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "escape")))
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	s, err := p.Prepare(context.Background(), source.Spec{Dir: dir})
	require.NoError(t, err)
	got, err := entries(t, s.Tar(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, "x", got["sub/f"])
	assert.Equal(t, "-> /etc/passwd", got["escape"], "a link is never followed (the lease refuses this one)")
	for name := range got {
		assert.NotContains(t, name, ".outpost", "project configuration never travels")
	}
	require.NoError(t, p.Close())
	_, err = os.Stat(filepath.Join(dir, "sub", "f"))
	assert.NoError(t, err, "a dir source is never removed")
}

// TestKernelDirSourceRefused: /dev, /proc and /sys (also through a link)
// are no project: preparing them is a configuration error naming the file
// system, before anything is copied.
func TestKernelDirSourceRefused(t *testing.T) {
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	link := filepath.Join(t.TempDir(), "devices")
	require.NoError(t, os.Symlink("/dev", link))
	for dir, fsys := range map[string]string{"/dev": "/dev", "/proc/self": "/proc", "/sys/kernel": "/sys", link: "/dev"} {
		_, err := p.Prepare(context.Background(), source.Spec{Dir: dir})
		require.Error(t, err, dir)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%s: %v", dir, err)
		assert.Contains(t, err.Error(), "inside "+fsys, dir)
	}
}

func TestTarBounds(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2048), 0o644))
	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir(), MaxBytes: 1024})
	require.NoError(t, err)
	defer p.Close()
	s, err := p.Prepare(context.Background(), source.Spec{Dir: dir})
	require.NoError(t, err)
	_, err = entries(t, s.Tar(context.Background()))
	require.ErrorIs(t, err, source.ErrTooLarge)

	fifo := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(fifo, "pipe"), 0o644))
	s, err = p.Prepare(context.Background(), source.Spec{Dir: fifo})
	require.NoError(t, err)
	_, err = entries(t, s.Tar(context.Background()))
	require.Error(t, err, "special files are refused")
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}

// TestHostileRepositoryConfig: a source repository's own configuration and
// hooks never run anything on the host while it is fetched and checked out.
func TestHostileRepositoryConfig(t *testing.T) {
	repo, ids := gitRepo(t)
	marker := filepath.Join(t.TempDir(), "PWNED")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	for _, h := range []string{"post-checkout", "post-merge", "reference-transaction", "pre-auto-gc"} {
		require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", h), []byte(hook), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(repo, "evil.sh"), []byte(hook), 0o755))
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("[core]\n\tfsmonitor = " + filepath.Join(repo, "evil.sh") + "\n\thooksPath = .git/hooks\n" +
		"[uploadpack]\n\tpackObjectsHook = " + filepath.Join(repo, "evil.sh") + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	p, err := source.NewPreparer(source.Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	defer p.Close()
	s, err := p.Prepare(context.Background(), source.Spec{Repo: repo, Commit: ids[1]})
	require.NoError(t, err)
	got, err := entries(t, s.Tar(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, "two\n", got["a.txt"])
	assert.NoFileExists(t, marker, "nothing of the repository ran")
	assert.NotContains(t, got[".git/config"], "fsmonitor", "the snapshot's configuration is its own")

	// Control: the planted configuration is live for git run in the
	// repository itself.
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	assert.FileExists(t, marker, "control: git in the repository runs its fsmonitor")
}

// TestSSHIdentity: git fetches an ssh source with an ssh that reads no
// configuration and offers no key or agent, unless SSHIdentity lets it use
// the user's: a jobs file from elsewhere cannot fetch a repository as you.
func TestSSHIdentity(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, identity := range []bool{false, true} {
		bin := t.TempDir()
		require.NoError(t, os.Symlink(gitBin, filepath.Join(bin, "git")))
		log := filepath.Join(t.TempDir(), "ssh.args")
		// The ssh git finds first on its PATH (the git binary's directory
		// leads it): it records its arguments and fails.
		require.NoError(t, os.WriteFile(filepath.Join(bin, "ssh"),
			[]byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >>"+log+"\nexit 255\n"), 0o755))
		p, err := source.NewPreparer(source.Options{TempDir: t.TempDir(), Git: filepath.Join(bin, "git"), SSHIdentity: identity})
		require.NoError(t, err)
		_, err = p.Prepare(context.Background(), source.Spec{Repo: "ssh://git@example.invalid/x.git", Commit: "main"})
		require.Error(t, err, "the fake ssh fails the fetch")
		require.NoError(t, p.Close())
		b, err := os.ReadFile(log)
		require.NoError(t, err, "git ran ssh")
		args := string(b)
		if identity {
			assert.NotContains(t, args, "IdentitiesOnly", "with SSHIdentity ssh runs as the user's")
			continue
		}
		for _, want := range []string{"-F\n/dev/null\n", "IdentitiesOnly=yes", "IdentityFile=none", "IdentityAgent=none", "BatchMode=yes"} {
			assert.Contains(t, args, want)
		}
	}
}
