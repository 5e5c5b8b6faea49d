package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// errUnsafeArchive marks an archive CopyIn refused.
var errUnsafeArchive = errors.New("unsafe archive")

// safeTar copies the tar stream r to w, entry by entry, and stops with an
// error at the first entry that could write outside the destination: an
// absolute name, a ".." component, a symbolic link whose target is absolute
// or leaves the destination, a hard link to such a name, or a special file.
// Owners are dropped (the sandbox user owns what it extracts). Everything
// before a refused entry has already been passed on, so the caller must
// abort the extraction instead of finishing it.
func safeTar(w io.Writer, r io.Reader) error {
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
		if err := checkEntry(h); err != nil {
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

// checkEntry applies the rules of safeTar to one header.
func checkEntry(h *tar.Header) error {
	if err := localName(h.Name); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir: //nolint:staticcheck // old-style regular files are still regular files
	case tar.TypeSymlink:
		if path.IsAbs(h.Linkname) {
			return fmt.Errorf("%w: %s links to absolute %s", errUnsafeArchive, h.Name, h.Linkname)
		}
		target := path.Join(path.Dir(strings.TrimSuffix(h.Name, "/")), h.Linkname)
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("%w: %s links outside the destination (%s)", errUnsafeArchive, h.Name, h.Linkname)
		}
	case tar.TypeLink:
		if err := localName(h.Linkname); err != nil {
			return fmt.Errorf("hard link %s: %w", h.Name, err)
		}
	default:
		return fmt.Errorf("%w: %s has unsupported type %q", errUnsafeArchive, h.Name, h.Typeflag)
	}
	return nil
}

// localName accepts relative names without ".." components ("./" is fine).
func localName(name string) error {
	if name == "" || path.IsAbs(name) || strings.HasPrefix(name, `\`) {
		return fmt.Errorf("%w: absolute or empty name %q", errUnsafeArchive, name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return fmt.Errorf("%w: %q has a .. component", errUnsafeArchive, name)
		}
	}
	return nil
}
