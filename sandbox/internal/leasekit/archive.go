package leasekit

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// ErrUnsafeArchive marks an archive entry that could write outside its
// destination.
var ErrUnsafeArchive = errors.New("unsafe archive")

// SafeTar copies the tar stream r to w entry by entry and stops with a
// configuration error at the first entry [CheckEntry] refuses. Owners are
// dropped (the sandbox user owns what it extracts). Everything before a
// refused entry has already been passed on, so the caller must abort the
// extraction instead of finishing it.
func SafeTar(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "read archive")
		}
		if err := CheckEntry(h); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "copy in")
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
}

// CheckEntry refuses a header that could write outside the destination: an
// absolute name, a ".." component, a symbolic link whose target is absolute
// or leaves the destination, a hard link to such a name, or a special file.
func CheckEntry(h *tar.Header) error {
	if err := LocalName(h.Name); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir: //nolint:staticcheck // old-style regular files are still regular files
	case tar.TypeSymlink:
		if path.IsAbs(h.Linkname) {
			return fmt.Errorf("%w: %s links to absolute %s", ErrUnsafeArchive, h.Name, h.Linkname)
		}
		target := path.Join(path.Dir(strings.TrimSuffix(h.Name, "/")), h.Linkname)
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("%w: %s links outside the destination (%s)", ErrUnsafeArchive, h.Name, h.Linkname)
		}
	case tar.TypeLink:
		if err := LocalName(h.Linkname); err != nil {
			return fmt.Errorf("hard link %s: %w", h.Name, err)
		}
	default:
		return fmt.Errorf("%w: %s has unsupported type %q", ErrUnsafeArchive, h.Name, h.Typeflag)
	}
	return nil
}

// LocalName accepts relative names without ".." components ("./" is fine).
func LocalName(name string) error {
	if name == "" || path.IsAbs(name) || strings.HasPrefix(name, `\`) {
		return fmt.Errorf("%w: absolute or empty name %q", ErrUnsafeArchive, name)
	}
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return fmt.Errorf("%w: %q has a .. component", ErrUnsafeArchive, name)
		}
	}
	return nil
}

// TarEntry writes d, an entry at path p of a directory walk, to tw as name
// (a directory's name gets its trailing "/"), with a regular file's
// content; edit, when not nil, adjusts the header first. Symbolic links are
// written as links, never followed. Sockets, devices and pipes are left
// out: written is false for them.
func TarEntry(tw *tar.Writer, p, name string, d fs.DirEntry, edit func(*tar.Header)) (written bool, err error) {
	info, err := d.Info()
	if err != nil {
		return false, err
	}
	link := ""
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		if link, err = os.Readlink(p); err != nil {
			return false, err
		}
	case info.Mode().IsRegular(), info.IsDir():
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
	if edit != nil {
		edit(h)
	}
	if err := tw.WriteHeader(h); err != nil {
		return false, err
	}
	if !info.Mode().IsRegular() {
		return true, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return true, err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, h.Size); err != nil {
		return true, fmt.Errorf("read %s: %w", p, err)
	}
	return true, nil
}
