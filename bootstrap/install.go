package bootstrap

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// MountRoot is where [Entry.Mount] puts cached CLIs inside a sandbox:
// MountRoot/<name>/<version>.
const MountRoot = "/opt/outpost/cli"

// CheckTimeout bounds one `--version` run in [Bootstrapper.Check].
const CheckTimeout = 60 * time.Second

// HostBinDir is the host directory holding the executable, for the PATH of
// a host sandbox (which runs [Entry.BinPath] in place).
func (e *Entry) HostBinDir() string { return filepath.Dir(e.BinPath) }

// SandboxDir is the entry's directory inside a sandbox that mounts it.
func (e *Entry) SandboxDir() string { return path.Join(MountRoot, e.Name, e.Version) }

// SandboxBin is the executable's path inside a sandbox that mounts the entry.
func (e *Entry) SandboxBin() string { return path.Join(e.SandboxDir(), e.Bin) }

// SandboxBinDir is the directory to put on the sandbox PATH for a mounted entry.
func (e *Entry) SandboxBinDir() string { return path.Dir(e.SandboxBin()) }

// Mount returns a read-only bind mount of the verified tree at
// [Entry.SandboxDir], for sandbox.Spec.Mounts: a cold container lease then
// copies nothing. The caller also puts [Entry.SandboxBinDir] on the PATH in
// Spec.Env. The host provider ignores mounts; use [Entry.BinPath] there.
func (e *Entry) Mount() sandbox.Mount {
	return sandbox.Mount{Source: e.Dir, Target: e.SandboxDir(), ReadOnly: true}
}

// Install puts the entry's tree into the sandbox under dir (a sandbox path;
// empty: <home>/.outpost/cli/<name>/<version>) and returns the executable's
// sandbox path. A binary already there is kept only if `--version` reports
// the pin; anything else is overwritten by a copy of the verified tree
// (modes kept) and then checked. An explicit dir must already exist; the
// default one is created.
func (b *Bootstrapper) Install(ctx context.Context, sb sandbox.Sandbox, e *Entry, dir string) (string, error) {
	return b.installIn(ctx, sb, e, dir, true)
}

// installIn is Install; probe says whether to look for the tree at dir
// before copying it.
func (b *Bootstrapper) installIn(ctx context.Context, sb sandbox.Sandbox, e *Entry, dir string, probe bool) (string, error) {
	into, prefix := dir, ""
	if dir == "" {
		into = sb.Home()
		prefix = path.Join(".outpost", "cli", e.Name, e.Version)
		dir = path.Join(into, prefix)
	}
	if !path.IsAbs(dir) || path.Clean(dir) != dir {
		return "", outposterr.New(outposterr.Configuration, "install %s: directory %q is not absolute and clean", e.Name, dir)
	}
	bin := path.Join(dir, e.Bin)
	if probe {
		if _, err := checkVersion(ctx, sb, e.Name, bin, e.Version, e.VersionLine); err == nil {
			return bin, nil
		} else if ctx.Err() != nil {
			return "", err
		}
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { _ = pw.CloseWithError(writeTree(pw, e, prefix)) })
	err := sb.CopyIn(ctx, into, pr)
	_ = pr.CloseWithError(errors.New("copy in ended"))
	wg.Wait()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("install %s: %w", e.Name, err)
		}
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "install %s %s into the sandbox", e.Name, e.Version)
	}
	if _, err := checkVersion(ctx, sb, e.Name, bin, e.Version, e.VersionLine); err != nil {
		return "", err
	}
	return bin, nil
}

// writeTree writes the entry's files as a tar stream, under prefix (whose
// directories are included so the sandbox creates them).
func writeTree(w io.Writer, e *Entry, prefix string) error {
	tw := tar.NewWriter(w)
	if prefix != "" {
		parts := strings.Split(prefix, "/")
		for i := range parts {
			name := strings.Join(parts[:i+1], "/") + "/"
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
	}
	for _, f := range e.Manifest.Files {
		name := path.Join(prefix, f.Path)
		h := &tar.Header{Name: name, Mode: int64(f.Mode), Format: tar.FormatPAX}
		switch f.Type {
		case "dir":
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case "symlink":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case "file":
			src, err := os.Open(filepath.Join(e.Dir, filepath.FromSlash(f.Path)))
			if err != nil {
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, f.Size
			err = tw.WriteHeader(h)
			if err == nil {
				_, err = io.CopyN(tw, src, f.Size)
			}
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Check runs `<bin> --version` in the sandbox (bounded by [CheckTimeout])
// and accepts it only when the output shows the named row's pinned version
// (its VersionLine when the row has one). It returns the matching line. A
// binary that is missing, fails, or reports anything else is a
// [outposterr.Bootstrap] error: it must be replaced, never trusted.
func (b *Bootstrapper) Check(ctx context.Context, sb sandbox.Sandbox, name, bin string) (string, error) {
	r, ok := b.cat.Row(name)
	if !ok {
		return "", outposterr.New(outposterr.Configuration, "check: no catalog row %q", name)
	}
	return checkVersion(ctx, sb, name, bin, r.Version, r.VersionLine)
}

func checkVersion(ctx context.Context, sb sandbox.Sandbox, name, bin, version, line string) (string, error) {
	fail := func(format string, args ...any) error {
		return outposterr.New(outposterr.Bootstrap, "check %s at %s: %s", name, bin, fmt.Sprintf(format, args...)).
			With(outposterr.Details{Agent: name})
	}
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	p, err := sb.Exec(cctx, sandbox.Command{Args: []string{bin, "--version"}})
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("check %s: %w", name, ctx.Err())
		}
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "check %s at %s", name, bin)
	}
	defer p.Close()
	var out, errOut bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&out, io.LimitReader(p.Stdout(), 64*1024)) })
	wg.Go(func() { _, _ = io.Copy(&errOut, io.LimitReader(p.Stderr(), 64*1024)) })
	st, err := p.Wait()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select { // a grandchild holding the pipes open gets a short drain window
	case <-done:
	case <-time.After(2 * time.Second):
		_ = p.Close()
		<-done
	}
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("check %s: %w", name, ctx.Err())
	case cctx.Err() != nil:
		return "", fail("--version did not finish within %s", CheckTimeout)
	case err != nil:
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "check %s at %s", name, bin)
	case !st.Success():
		return "", fail("--version: %s: %s", st, firstLine(errOut.String()+out.String()))
	}
	if l, ok := matchVersion(out.String(), version, line); ok {
		return l, nil
	}
	want := version
	if line != "" {
		want = fmt.Sprintf(line, version)
	}
	return "", fail("reports %q, want %q", firstLine(out.String()), want)
}

// matchVersion finds the line of out that proves version.
func matchVersion(out, version, line string) (string, bool) {
	var token *regexp.Regexp
	if line == "" {
		token = regexp.MustCompile(`(^|[^0-9A-Za-z.+-])` + regexp.QuoteMeta(version) + `($|[^0-9A-Za-z.+-]|\.($|[^0-9A-Za-z]))`)
	}
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		if line != "" && l == fmt.Sprintf(line, version) || token != nil && token.MatchString(l) {
			return l, true
		}
	}
	return "", false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
