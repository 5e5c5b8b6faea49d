// Package safefs opens files and directories beneath a trusted directory
// without following symbolic links, for paths an agent or a repository may
// have planted: a project's .outpost/.env and drivers, a conversation store
// inside a workspace.
//
// Every component below the trusted base is checked with Lstat, opened
// through an [os.Root] (which never leaves the directory it was opened on)
// and compared with the checked one (same device and inode), so a link
// swapped in between is refused too. Errors name paths, never content.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrLink is wrapped by errors for a path component that is a symbolic
// link (or changed while it was opened).
var ErrLink = errors.New("is a symbolic link")

// ErrNotRegular is wrapped by errors for a file that is not a regular file
// (a directory, a pipe, a device).
var ErrNotRegular = errors.New("is not a regular file")

// ErrNotDir is wrapped by errors for a directory component that is not a
// directory.
var ErrNotDir = errors.New("is not a directory")

// ErrTooLarge is wrapped by errors for a file over the caller's limit.
var ErrTooLarge = errors.New("too large")

// ErrOwner is wrapped by errors for a file another user owns or may write.
var ErrOwner = errors.New("not trusted")

// split turns rel into its components; rel must be local (no "..", not
// absolute). An empty rel or "." has no components.
func split(rel string) ([]string, error) {
	rel = filepath.Clean(rel)
	if rel == "." {
		return nil, nil
	}
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("path %q is not beneath its directory", rel)
	}
	return strings.Split(filepath.ToSlash(rel), "/"), nil
}

// OpenDir opens base/rel as an [os.Root]. base is trusted as given; no
// component of rel may be a symbolic link or anything but a directory. With
// create, missing components are made with mode 0700.
func OpenDir(base, rel string, create bool) (*os.Root, error) {
	if _, err := split(rel); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return OpenDirIn(r, rel, create)
}

// OpenDirIn is [OpenDir] beneath an open directory. The result is a new
// root the caller closes (root itself stays open).
func OpenDirIn(root *os.Root, rel string, create bool) (*os.Root, error) {
	parts, err := split(rel)
	if err != nil {
		return nil, err
	}
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	walked := root.Name()
	for _, p := range parts {
		next, err := enter(cur, p, walked, create)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
		walked = filepath.Join(walked, p)
	}
	return cur, nil
}

// enter opens the directory name of cur, refusing links.
func enter(cur *os.Root, name, walked string, create bool) (*os.Root, error) {
	where := filepath.Join(walked, name)
	fi, err := cur.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := cur.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err = cur.Lstat(name)
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s %w", where, ErrLink)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s %w", where, ErrNotDir)
	}
	next, err := cur.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	got, err := next.Stat(".")
	if err != nil || !os.SameFile(fi, got) {
		next.Close()
		return nil, fmt.Errorf("%s changed while it was opened: %w", where, ErrLink)
	}
	return next, nil
}

// Open opens the regular file base/rel for reading; no component of rel
// may be a symbolic link. The caller closes the file.
func Open(base, rel string) (*os.File, fs.FileInfo, error) {
	dir, name := filepath.Split(filepath.Clean(rel))
	if name == "" || name == "." || name == ".." {
		return nil, nil, fmt.Errorf("path %q names no file", rel)
	}
	root, err := OpenDir(base, dir, false)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	return OpenIn(root, name)
}

// OpenIn opens the regular file name (one component) of root for reading,
// refusing a link, a non-regular file, and a file swapped while it was
// opened. A pipe or device does not block the open.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	where := filepath.Join(root.Name(), name)
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("%s %w", where, ErrLink)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s %w", where, ErrNotRegular)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	got, err := f.Stat()
	if err != nil || !os.SameFile(fi, got) || !got.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s changed while it was opened: %w", where, ErrLink)
	}
	return f, got, nil
}

// ReadFile reads the regular file base/rel, at most max bytes, without
// following links (see [Open]).
func ReadFile(base, rel string, max int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := Open(base, rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := ReadAllMax(f, max)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(base, rel), err)
	}
	return b, fi, nil
}

// ReadAllMax reads r to the end, refusing more than max bytes.
func ReadAllMax(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, max)
	}
	return b, nil
}

// CheckOwner refuses a file whose content is trusted (configuration) when
// another user than the process's (or root) owns it, or when any user may
// write it: such a file may have been planted by someone else, an agent
// lease running as another user included. Where ownership is unknown
// (non-Unix systems) it accepts.
func CheckOwner(where string, fi fs.FileInfo) error {
	uid, _, ok := Owner(fi)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); uid != me && uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by you (uid %d) or root: %w", where, uid, me, ErrOwner)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%s is writable by every user: %w", where, ErrOwner)
	}
	return nil
}

// RemoveAllIn removes the entry name (one component) of root and everything
// beneath it without following a symbolic link: a link is removed, never
// what it points to (the removal goes through root, see [os.Root.RemoveAll]).
// Read-only directories in the tree (a Go module cache) are made writable
// first when they stop the removal; each is reached through no link. A
// missing entry is not an error.
func RemoveAllIn(root *os.Root, name string) error {
	if parts, err := split(name); err != nil || len(parts) != 1 {
		return fmt.Errorf("path %q is not one entry of its directory", name)
	}
	err := root.RemoveAll(name)
	if err == nil {
		return nil
	}
	_ = fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil || !d.IsDir() {
			return nil
		}
		dir, err := OpenDirIn(root, filepath.FromSlash(p), false)
		if err != nil {
			return fs.SkipDir
		}
		defer dir.Close()
		_ = dir.Chmod(".", 0o700)
		return nil
	})
	return root.RemoveAll(name)
}
