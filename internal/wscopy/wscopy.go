// Package wscopy gives a lease a private copy of a workspace and brings the
// lease's changes back: [Copy] copies the tree with every entry owned by the
// lease user, [Sync] makes the original what the copy became, writing
// changed files in place (their owner stays) and creating new entries with
// the workspace owner's ids. Both work through [os.Root], so no link in
// either tree leads them outside it.
//
// Regular files, directories and symbolic links are copied with their
// permission bits and modification times; other files (sockets, devices,
// FIFOs) are left out of the copy and left alone in the original. Sync makes
// no new link that is absolute or leads out of the tree (links the original
// had stay). Paths
// given as skip (workspace-relative, slash-separated) are neither copied nor
// touched by Sync.
package wscopy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Copy copies the tree at src into dst, an existing empty directory, every
// entry owned by uid:gid (negative: left as created). dst itself takes src's
// permission bits and the same owner.
func Copy(src, dst string, uid, gid int, skip []string) error {
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	return fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && skipped(p, skip) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := from.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if p != "." {
				if err := to.Mkdir(p, 0o700); err != nil {
					return err
				}
			}
			if err := to.Chmod(p, fi.Mode().Perm()); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := from.Readlink(p)
			if err != nil {
				return err
			}
			if err := to.Symlink(target, p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(from, to, p, fi); err != nil {
				return err
			}
		default:
			return nil // not copied
		}
		return chown(to, p, uid, gid)
	})
}

// Sync makes the tree at dst (the original) what the tree at src (the
// copy) is: new and changed files, links and directories are written (a
// regular file whose size, modification time and permissions are src's is
// taken as unchanged), entries src no longer holds are removed. A file
// written in place keeps its owner; entries Sync creates are owned by
// uid:gid (negative: left as created).
func Sync(src, dst string, uid, gid int, skip []string) error {
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	// Removals first, deepest first, so a directory replaced by a file (or
	// the other way round) is out of the way.
	var gone []string
	err = fs.WalkDir(to.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if skipped(p, skip) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		tfi, err := to.Lstat(p)
		if err != nil {
			return err
		}
		if !copied(tfi.Mode()) {
			return nil // never copied, so never removed
		}
		sfi, err := from.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			gone = append(gone, p)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case err != nil:
			return err
		case sfi.IsDir() != tfi.IsDir() || (sfi.Mode()&fs.ModeSymlink) != (tfi.Mode()&fs.ModeSymlink):
			gone = append(gone, p)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range slices.Backward(gone) {
		if err := to.RemoveAll(p); err != nil {
			return err
		}
	}
	return fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && skipped(p, skip) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		sfi, err := from.Lstat(p)
		if err != nil {
			return err
		}
		tfi, terr := to.Lstat(p)
		if terr != nil && !errors.Is(terr, fs.ErrNotExist) {
			return terr
		}
		exists := terr == nil
		switch {
		case sfi.IsDir():
			if !exists {
				if err := to.Mkdir(p, 0o700); err != nil {
					return err
				}
			}
			if !exists || tfi.Mode().Perm() != sfi.Mode().Perm() {
				if err := to.Chmod(p, sfi.Mode().Perm()); err != nil {
					return err
				}
			}
		case sfi.Mode()&fs.ModeSymlink != 0:
			target, err := from.Readlink(p)
			if err != nil {
				return err
			}
			if exists {
				if cur, err := to.Readlink(p); err == nil && cur == target {
					return nil
				}
			}
			if !inside(p, target) {
				// A new link out of the workspace is not made (as the
				// Kubernetes sandbox's sync-back does not): something
				// run as root later would write through it.
				return nil
			}
			if exists {
				if err := to.Remove(p); err != nil {
					return err
				}
			}
			if err := to.Symlink(target, p); err != nil {
				return err
			}
		case sfi.Mode().IsRegular():
			if exists && !tfi.Mode().IsRegular() {
				return fmt.Errorf("%s: not a regular file in %s, left as it is", p, dst)
			}
			if exists && tfi.Size() == sfi.Size() && tfi.ModTime().Equal(sfi.ModTime()) && tfi.Mode().Perm() == sfi.Mode().Perm() {
				return nil
			}
			if err := copyFile(from, to, p, sfi); err != nil {
				return err
			}
		default:
			return nil
		}
		if exists {
			return nil // its owner stays
		}
		return chown(to, p, uid, gid)
	})
}

// inside reports whether the link target, read at the slash-separated path
// p, stays inside the tree.
func inside(p, target string) bool {
	if path.IsAbs(target) || filepath.IsAbs(target) {
		return false
	}
	return filepath.IsLocal(filepath.Join(filepath.Dir(filepath.FromSlash(p)), target))
}

// copied reports whether Copy copies an entry of mode m.
func copied(m fs.FileMode) bool { return m.IsDir() || m.IsRegular() || m&fs.ModeSymlink != 0 }

// skipped reports whether the slash-separated path p is one of skip or
// under one.
func skipped(p string, skip []string) bool {
	for _, s := range skip {
		s = path.Clean(filepath.ToSlash(s))
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// copyFile writes the regular file p of from to p of to (in place when it
// exists there, so its owner stays), with fi's permissions and
// modification time.
func copyFile(from, to *os.Root, p string, fi fs.FileInfo) error {
	in, err := from.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := to.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Chmod(fi.Mode().Perm()); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return to.Chtimes(p, fi.ModTime(), fi.ModTime())
}

func chown(r *os.Root, p string, uid, gid int) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	return r.Lchown(p, uid, gid)
}
