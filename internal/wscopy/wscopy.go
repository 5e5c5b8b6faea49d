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
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/internal/safetar"
)

// Base is the state of a copy as [Copy] made it: [Sync] writes back only
// what changed since, so a change made to the original meanwhile (another
// lease's, written back first) is not undone.
type Base map[string]entry

// entry is what Sync compares of a path.
type entry struct {
	mode   fs.FileMode
	size   int64
	mtime  int64
	target string
}

// state reads the entries of the tree at root (skipped paths left out).
func state(root *os.Root, skip []string) (Base, error) {
	b := Base{}
	err := walk(root, skip, func(p string, fi fs.FileInfo) error {
		if !copied(fi.Mode()) {
			return nil
		}
		e := entry{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			e.target = target
		}
		if fi.IsDir() {
			e.size, e.mtime = 0, 0 // a directory changes with its entries
		}
		b[p] = e
		return nil
	})
	return b, err
}

// walk calls fn with the path and Lstat of every entry of the tree at root,
// parents first, skipped paths (and what is below them) left out.
func walk(root *os.Root, skip []string, fn func(p string, fi fs.FileInfo) error) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && skipped(p, skip) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		return fn(p, fi)
	})
}

// Copy copies the tree at src into dst, an existing empty directory, every
// entry owned by uid:gid (negative: left as created), and returns the
// copy's state. dst itself takes src's permission bits and the same owner.
func Copy(src, dst string, uid, gid int, skip []string) (Base, error) {
	from, err := os.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer to.Close()
	if err := copyTree(from, to, uid, gid, skip); err != nil {
		return nil, err
	}
	return state(to, skip)
}

func copyTree(from, to *os.Root, uid, gid int, skip []string) error {
	return walk(from, skip, func(p string, fi fs.FileInfo) error {
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

// Sync writes what changed in the tree at src (the copy) since base, its
// state when [Copy] made it, into the tree at dst (the original): new and
// changed files, links and directories are written, entries the copy no
// longer holds are removed; entries the copy left as they were are not
// touched, whatever dst holds there now. A file written in place keeps its
// owner; entries Sync creates are owned by uid:gid (negative: left as
// created).
func Sync(src, dst string, base Base, uid, gid int, skip []string) error {
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
	now, err := state(from, skip)
	if err != nil {
		return err
	}
	// Removals first, deepest first, so a directory replaced by a file (or
	// the other way round) is out of the way.
	var gone []string
	for p, was := range base {
		if p == "." {
			continue
		}
		if cur, ok := now[p]; !ok || cur.mode.Type() != was.mode.Type() {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range slices.Backward(gone) {
		if _, err := to.Lstat(p); err != nil {
			continue // not there (any more)
		}
		if err := to.RemoveAll(p); err != nil {
			return err
		}
	}
	return fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		cur, ok := now[p]
		if !ok {
			if d.IsDir() && p != "." {
				return fs.SkipDir // skipped, or not copied
			}
			return nil
		}
		if was, had := base[p]; had && was == cur {
			return nil // the lease left it as it was
		}
		tfi, terr := to.Lstat(p)
		if terr != nil && !errors.Is(terr, fs.ErrNotExist) {
			return terr
		}
		exists := terr == nil
		if exists && tfi.Mode().Type() != cur.mode.Type() {
			if err := to.RemoveAll(p); err != nil {
				return err
			}
			exists = false
		}
		switch {
		case cur.mode.IsDir():
			if !exists {
				if err := to.Mkdir(p, 0o700); err != nil {
					return err
				}
			}
			if !exists || tfi.Mode().Perm() != cur.mode.Perm() {
				if err := to.Chmod(p, cur.mode.Perm()); err != nil {
					return err
				}
			}
		case cur.mode&fs.ModeSymlink != 0:
			if exists {
				if t, err := to.Readlink(p); err == nil && t == cur.target {
					return nil
				}
			}
			if !inside(p, cur.target) || !realParent(to, p) {
				// A new link out of the workspace is not made (as the
				// Kubernetes sandbox's sync-back does not): something
				// run as root later would write through it. Nor is one
				// whose parent in the original is reached through a
				// link (changed there meanwhile): it would not be where
				// its name says, and its target would be judged from
				// the wrong place.
				return nil
			}
			if exists {
				if err := to.Remove(p); err != nil {
					return err
				}
			}
			if err := to.Symlink(cur.target, p); err != nil {
				return err
			}
		default:
			sfi, err := from.Lstat(p)
			if err != nil {
				return err
			}
			if exists && shared(tfi) {
				// A file with other names (a hard link, perhaps to a
				// package manager's store outside the workspace) is
				// replaced, not written in place: its other names keep
				// their content. Its owner stays.
				if err := to.Remove(p); err != nil {
					return err
				}
				if err := copyFile(from, to, p, sfi); err != nil {
					return err
				}
				return keepOwner(to, p, tfi)
			}
			if err := copyFile(from, to, p, sfi); err != nil {
				return err
			}
		}
		if exists {
			return nil // its owner stays
		}
		return chown(to, p, uid, gid)
	})
}

// inside reports whether the link target, read at the slash-separated path
// p, stays inside the tree. Judged lexically, as [safetar.CheckLink] judges
// it: a target that goes down and back up ("q/..") is refused, since the
// way down could be another link ("q" -> ".") and the chain lead out.
func inside(p, target string) bool {
	if path.IsAbs(target) || filepath.IsAbs(target) {
		return false
	}
	return safetar.CheckLink(p, filepath.ToSlash(target)) == nil &&
		filepath.IsLocal(filepath.Join(filepath.Dir(filepath.FromSlash(p)), target))
}

// realParent reports whether every directory above the slash-separated
// path p in root is a directory, none of them a link.
func realParent(root *os.Root, p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		fi, err := root.Lstat(d)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
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

// keepOwner gives p of r the owner of was, the file p replaced.
func keepOwner(r *os.Root, p string, was fs.FileInfo) error {
	uid, gid, ok := safefs.Owner(was)
	if !ok {
		return nil
	}
	fi, err := r.Lstat(p)
	if err != nil {
		return err
	}
	if u, g, ok := safefs.Owner(fi); ok && u == uid && g == gid {
		return nil
	}
	return r.Lchown(p, uid, gid)
}

func chown(r *os.Root, p string, uid, gid int) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	return r.Lchown(p, uid, gid)
}
