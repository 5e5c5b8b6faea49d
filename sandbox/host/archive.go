package host

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/internal/safetar"
	"github.com/outpost-dev/outpost/outposterr"
)

// ErrInvalidArchive is wrapped by CopyIn errors about the archive itself:
// unsafe entry names or link targets, unsupported entry types, corrupt data.
var ErrInvalidArchive = errors.New("invalid archive")

// CopyIn extracts the tar stream r under dir, which must be an absolute path
// of an existing directory. Modes are kept (permission bits only; setuid,
// setgid and sticky bits are dropped), files belong to the current user
// whatever the archive says. Entries with absolute names or ".." components,
// symbolic links pointing outside dir, writes through existing symbolic links
// that lead outside dir, and entry types other than regular files,
// directories and symbolic links are refused with [ErrInvalidArchive].
// Extraction is not atomic: entries before a refused one stay.
func (l *lease) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	if err := l.checkLive("copy in"); err != nil {
		return err
	}
	return extract(ctx, dir, r)
}

// CopyOut streams path (a file, a directory tree, or a symbolic link, which
// is not followed) as a tar archive whose entry names are relative to path's
// parent directory. Sockets, pipes and devices are skipped. A missing path is
// an error wrapping fs.ErrNotExist. Closing the returned reader stops the
// stream.
func (l *lease) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := l.checkLive("copy out"); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p) {
		return nil, outposterr.New(outposterr.Configuration, "copy out: path %q is not absolute", p)
	}
	p = filepath.Clean(p)
	if _, err := os.Lstat(p); err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "copy out")
	}
	pr, pw := io.Pipe()
	go func() {
		err := archive(ctx, p, pw)
		if err != nil {
			err = outposterr.Wrap(outposterr.Sandbox, err, "copy out %s", p)
		}
		_ = pw.CloseWithError(err)
	}()
	return pr, nil
}

// archive writes the tree at p to w as tar, names relative to p's parent.
func archive(ctx context.Context, p string, w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := (safetar.Tree{Dir: filepath.Dir(p), Top: filepath.Base(p)}).Write(ctx, tw); err != nil {
		return err
	}
	return tw.Close()
}

// extract unpacks r under dir; see CopyIn.
func extract(ctx context.Context, dir string, r io.Reader) error {
	if !filepath.IsAbs(dir) {
		return outposterr.New(outposterr.Configuration, "copy in: directory %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "copy in")
	}
	if !fi.IsDir() {
		return outposterr.New(outposterr.Sandbox, "copy in: %s is not a directory", dir)
	}
	x := &extractor{dir: dir}
	if x.realDir, err = filepath.EvalSymlinks(dir); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "copy in")
	}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copy in: %w", err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return invalid(err, "read")
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	// Directory modes last, deepest first, so a read-only directory in the
	// archive does not stop its own entries from being written.
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		if err := os.Chmod(d.path, d.hdr.FileInfo().Mode().Perm()); err != nil {
			return outposterr.Wrap(outposterr.Sandbox, err, "copy in")
		}
		if !d.hdr.ModTime.IsZero() {
			_ = os.Chtimes(d.path, d.hdr.ModTime, d.hdr.ModTime)
		}
	}
	return nil
}

// invalid wraps a refusal of the archive as a configuration error.
func invalid(cause error, format string, args ...any) error {
	return outposterr.Wrap(outposterr.Configuration,
		fmt.Errorf("%w: %s: %w", ErrInvalidArchive, fmt.Sprintf(format, args...), cause), "copy in")
}

func refuse(format string, args ...any) error {
	return outposterr.Wrap(outposterr.Configuration,
		fmt.Errorf("%w: %s", ErrInvalidArchive, fmt.Sprintf(format, args...)), "copy in")
}

type extractor struct {
	dir     string // the destination, as given (cleaned)
	realDir string // dir with symbolic links resolved
	dirs    []pendingDir
}

type pendingDir struct {
	path string
	hdr  *tar.Header
}

// entry extracts one archive entry.
func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the destination itself: leave its mode alone
		}
		return refuse("entry %q names the destination itself", hdr.Name)
	}
	target := filepath.Join(x.dir, filepath.FromSlash(name))
	if err := x.parents(filepath.Dir(target)); err != nil {
		return err
	}
	wrap := func(err error) error {
		return outposterr.Wrap(outposterr.Sandbox, err, "copy in %s", name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		existing, err := os.Lstat(target)
		switch {
		case err == nil && existing.IsDir():
		case err == nil:
			if err := os.Remove(target); err != nil {
				return wrap(err)
			}
			fallthrough
		default:
			if err := os.Mkdir(target, 0o700); err != nil {
				return wrap(err)
			}
		}
		x.dirs = append(x.dirs, pendingDir{path: target, hdr: hdr})
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is still written by old tars
		if err := x.replace(target); err != nil {
			return wrap(err)
		}
		// O_EXCL also refuses a symbolic link that appeared at target.
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return wrap(err)
		}
		_, cerr := io.CopyN(f, r, hdr.Size)
		if err := errors.Join(cerr, f.Chmod(hdr.FileInfo().Mode().Perm()), f.Close()); err != nil {
			if cerr != nil {
				return invalid(cerr, "entry %q", hdr.Name)
			}
			return wrap(err)
		}
		if !hdr.ModTime.IsZero() {
			_ = os.Chtimes(target, hdr.ModTime, hdr.ModTime)
		}
	case tar.TypeSymlink:
		if err := x.checkLink(name, target, hdr.Linkname); err != nil {
			return err
		}
		if err := x.replace(target); err != nil {
			return wrap(err)
		}
		if err := os.Symlink(hdr.Linkname, target); err != nil {
			return wrap(err)
		}
	default:
		return refuse("entry %q has unsupported type %q", hdr.Name, string(hdr.Typeflag))
	}
	return nil
}

// entryName validates a raw entry name ([safetar.EntryName]) and returns it
// cleaned, relative, slash-separated ("." for the destination itself).
func entryName(raw string) (string, error) {
	name, err := safetar.EntryName(raw)
	if err != nil {
		return "", invalid(err, "entry %q", raw)
	}
	return name, nil
}

// parents makes sure every directory from x.dir down to parent exists,
// creating missing ones, and that none of them leads outside x.dir through a
// symbolic link.
func (x *extractor) parents(parent string) error {
	rel, err := filepath.Rel(x.dir, parent)
	if err != nil || rel == "." {
		return err
	}
	cur := x.dir
	for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return outposterr.Wrap(outposterr.Sandbox, err, "copy in")
			}
			continue
		case err != nil:
			return outposterr.Wrap(outposterr.Sandbox, err, "copy in")
		case fi.IsDir():
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			real, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return refuse("%s is a dangling symbolic link", cur)
			}
			if !within(x.realDir, real) {
				return refuse("%s is a symbolic link leading outside %s", cur, x.dir)
			}
			if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
				return refuse("%s is not a directory", cur)
			}
		default:
			return refuse("%s is not a directory", cur)
		}
	}
	return nil
}

// checkLink refuses a symbolic link at target (the entry name) whose
// destination lies outside x.dir. A relative one is judged as
// [safetar.CheckLink] judges it, from where its parent really is: a parent
// reached through a link in the destination ("p" -> "." then "p/l" -> "..")
// puts the link elsewhere than its name says. An absolute one must name
// x.dir or a path under it without a ".." (on this machine an absolute link
// into the destination is as good as a relative one).
func (x *extractor) checkLink(name, target, link string) error {
	if !filepath.IsAbs(link) {
		parent, err := filepath.EvalSymlinks(filepath.Dir(target))
		if err != nil {
			return outposterr.Wrap(outposterr.Sandbox, err, "copy in %s", name)
		}
		rel, err := filepath.Rel(x.realDir, parent)
		if err != nil || !within(x.realDir, parent) {
			return refuse("symbolic link %s lies outside the destination", target)
		}
		if err := safetar.CheckLink(path.Join(filepath.ToSlash(rel), path.Base(name)), link); err != nil {
			return invalid(err, "entry %q", name)
		}
		return nil
	}
	dest := filepath.Clean(link)
	if slices.Contains(strings.Split(filepath.ToSlash(link), "/"), "..") || !within(x.dir, dest) && !within(x.realDir, dest) {
		return refuse("symbolic link %s points outside the destination (%q)", target, link)
	}
	return nil
}

// replace removes whatever non-directory sits at target.
func (x *extractor) replace(target string) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", target)
	}
	return os.Remove(target)
}

// within reports whether p is root or lies under it (both clean and absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
