// Package safetar is what Outpost's tar writers and extractors share: the
// checks of an entry's name and link target before it is extracted beneath
// a directory ([EntryName], [CheckLink]), and the walk that writes a
// directory tree of this machine as tar entries ([Tree]) without following
// symbolic links.
//
// The extractors keep their own policies on top (the host sandbox's
// CopyIn, the Kubernetes workspace sync, the CLI bootstrap, the container
// kinds' CopyIn check); what makes a name or a link unsafe is decided here.
package safetar

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
	"strings"
	"syscall"
)

// ErrUnsafe is wrapped by every refusal of [EntryName] and [CheckLink].
var ErrUnsafe = errors.New("unsafe archive entry")

// ErrTooLarge is wrapped by [Tree.Write] errors for a tree over its bounds.
var ErrTooLarge = errors.New("too large")

// EntryName checks the raw name of an archive entry to be extracted beneath
// a directory and returns it cleaned, relative and slash-separated ("." for
// the directory itself; a leading "./" is fine). It refuses an empty name,
// a NUL byte, an absolute name ("/" or "\" first) and a ".." component.
func EntryName(raw string) (string, error) {
	switch {
	case raw == "":
		return "", fmt.Errorf("%w: empty name", ErrUnsafe)
	case strings.ContainsRune(raw, 0):
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafe, raw)
	case strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, `\`):
		return "", fmt.Errorf("%w: %q has an absolute name", ErrUnsafe, raw)
	}
	for part := range strings.SplitSeq(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q has a .. component", ErrUnsafe, raw)
		}
	}
	return path.Clean(raw), nil
}

// CheckLink refuses a symbolic link at the entry name (relative, as
// [EntryName] returns it) whose target could lead outside the directory it
// is extracted beneath: an empty target, a NUL byte, an absolute target, or
// a relative one that leaves the directory when joined to name's parent
// (judged lexically), and one that goes down and back up ("b/../x"): with b
// itself a link, lexical judgement would be wrong, and a chain of such
// links could point anywhere. Lexical judgement holds only when name's
// parent, as extracted, is not reached through a link either: an
// extractor writing to disk judges name from its parent's real place.
func CheckLink(name, link string) error {
	switch {
	case link == "":
		return fmt.Errorf("%w: symbolic link %s has no target", ErrUnsafe, name)
	case strings.ContainsRune(link, 0):
		return fmt.Errorf("%w: symbolic link %s: target contains a NUL byte", ErrUnsafe, name)
	case path.IsAbs(link):
		return fmt.Errorf("%w: symbolic link %s points to absolute %s", ErrUnsafe, name, link)
	}
	if downAndUp(link) {
		return fmt.Errorf("%w: symbolic link %s: target %s goes down and back up (the way down could be another link)", ErrUnsafe, name, link)
	}
	target := path.Join(path.Dir(strings.TrimSuffix(name, "/")), link)
	if target == ".." || strings.HasPrefix(target, "../") {
		return fmt.Errorf("%w: symbolic link %s points outside the destination (%s)", ErrUnsafe, name, link)
	}
	return nil
}

// Pick is a [Tree.Filter]'s decision about one entry.
type Pick int

const (
	// Keep writes the entry (and walks a directory's content).
	Keep Pick = iota
	// Omit leaves the entry out but still walks a directory's content.
	Omit
	// Prune leaves the entry out, and a directory's whole content.
	Prune
)

// Tree writes a directory tree of this machine as tar entries. Directories,
// regular files (with their content) and symbolic links (as links, never
// followed) are written; every file is opened beneath Dir through an
// [os.Root] without following a link, so a file swapped for a link after
// the walk saw it is refused, not read. A regular file's size is fixed by
// its header: one that grew is cut, one that shrank is an error.
type Tree struct {
	// Dir is the directory entry names are relative to.
	Dir string
	// Top is what is walked beneath Dir (slash-separated; "" or ".": Dir
	// itself, whose own entry is left out). A Top that is a file or a
	// link is one entry.
	Top string
	// Filter, when not nil, decides about each entry by its name
	// (slash-separated, relative to Dir, no trailing "/").
	Filter func(name string, isDir bool) (Pick, error)
	// Edit, when not nil, adjusts each header before it is written.
	Edit func(*tar.Header)
	// Written, when not nil, is told the name of each entry written.
	Written func(name string)
	// MaxEntries and MaxBytes (regular files' sizes), when positive, bound
	// the tree; more is an error wrapping [ErrTooLarge].
	MaxEntries int
	MaxBytes   int64
	// RefuseSpecial makes a socket, pipe or device an error; else such
	// entries are left out.
	RefuseSpecial bool
}

// Write writes the tree's entries to tw (which it does not close). It
// stops at the first error, ctx's included.
func (t Tree) Write(ctx context.Context, tw *tar.Writer) error {
	root, err := os.OpenRoot(t.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	top := path.Clean("/" + t.Top)[1:]
	if top == "" {
		top = "."
	}
	var entries int
	var total int64
	visit := func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if t.Filter != nil {
			switch pick, err := t.Filter(name, d.IsDir()); {
			case err != nil:
				return err
			case pick == Prune && d.IsDir():
				return fs.SkipDir
			case pick != Keep:
				return nil
			}
		}
		if entries++; t.MaxEntries > 0 && entries > t.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, t.MaxEntries)
		}
		info, err := d.Info() // Lstat: links are never followed
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			if total += info.Size(); t.MaxBytes > 0 && total > t.MaxBytes {
				return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, t.MaxBytes)
			}
		}
		written, err := t.entry(tw, root, name, info)
		if written && t.Written != nil {
			t.Written(name)
		}
		return err
	}
	if top != "." {
		// fs.WalkDir would follow a Top that is a link: a non-directory
		// Top is one entry.
		info, err := root.Lstat(top)
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return visit(top, fs.FileInfoToDirEntry(info), nil)
		}
	}
	return fs.WalkDir(root.FS(), top, visit)
}

// entry writes one entry; written is false for a special file left out.
func (t Tree) entry(tw *tar.Writer, root *os.Root, name string, info fs.FileInfo) (written bool, err error) {
	link := ""
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		if link, err = root.Readlink(name); err != nil {
			return false, err
		}
	case info.Mode().IsRegular(), info.IsDir():
	case t.RefuseSpecial:
		return false, fmt.Errorf("%s is not a regular file, directory or symbolic link", name)
	default:
		return false, nil
	}
	h, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return false, err
	}
	h.Name = name
	if info.IsDir() {
		h.Name += "/"
	}
	if t.Edit != nil {
		t.Edit(h)
	}
	if !info.Mode().IsRegular() {
		return true, tw.WriteHeader(h)
	}
	// Opened beneath the root without following a link: a file swapped
	// for a link after the walk saw it is refused.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return false, err
	}
	if _, err := io.CopyN(tw, f, h.Size); err != nil {
		return true, fmt.Errorf("read %s: %w", filepath.Join(t.Dir, filepath.FromSlash(name)), err)
	}
	return true, nil
}

// downAndUp reports whether a link target has a ".." after a name: "a/../b"
// or "a/.." (not "../a", nor "./a").
func downAndUp(link string) bool {
	down := false
	for part := range strings.SplitSeq(link, "/") {
		switch part {
		case "", ".":
		case "..":
			if down {
				return true
			}
		default:
			down = true
		}
	}
	return false
}
