package leasekit

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"

	"github.com/outpost-dev/outpost/internal/safetar"
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

// CheckEntry refuses a header that could write outside the destination: a
// name [safetar.EntryName] refuses, a symbolic link [safetar.CheckLink]
// refuses, a hard link to a name EntryName refuses, or a special file.
func CheckEntry(h *tar.Header) error {
	if _, err := safetar.EntryName(h.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeArchive, err)
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir: //nolint:staticcheck // old-style regular files are still regular files
	case tar.TypeSymlink:
		if err := safetar.CheckLink(h.Name, h.Linkname); err != nil {
			return fmt.Errorf("%w: %w", ErrUnsafeArchive, err)
		}
	case tar.TypeLink:
		if _, err := safetar.EntryName(h.Linkname); err != nil {
			return fmt.Errorf("%w: hard link %s: %w", ErrUnsafeArchive, h.Name, err)
		}
	default:
		return fmt.Errorf("%w: %s has unsupported type %q", ErrUnsafeArchive, h.Name, h.Typeflag)
	}
	return nil
}
