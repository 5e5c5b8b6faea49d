package bootstrap

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/outpost-dev/outpost/internal/safetar"
)

// ErrUnsafeArchive is wrapped by every refusal of an archive's content: an
// absolute or ".." entry name, a link that could lead outside the installed
// tree, a hard link, device or FIFO entry, a duplicate entry, or an entry
// or archive over the [Limits].
var ErrUnsafeArchive = errors.New("unsafe archive")

// Limits bound what a download and its extraction may cost. Zero fields take
// the defaults below, which leave room for the largest pinned CLI (Claude
// Code's 373 MB executable in a 172 MB tarball).
type Limits struct {
	// MaxDownload caps the compressed download. Default 1 GiB.
	MaxDownload int64
	// MaxUnpacked caps the decompressed archive stream, skipped entries
	// included (a decompression bomb stops here). Default 4 GiB.
	MaxUnpacked int64
	// MaxEntry caps the size of any single entry. Default 1 GiB.
	MaxEntry int64
	// MaxEntries caps the number of entries. Default 100000.
	MaxEntries int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDownload <= 0 {
		l.MaxDownload = 1 << 30
	}
	if l.MaxUnpacked <= 0 {
		l.MaxUnpacked = 4 << 30
	}
	if l.MaxEntry <= 0 {
		l.MaxEntry = 1 << 30
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 100000
	}
	return l
}

// File is one extracted path, relative to the installed tree.
type File struct {
	Path string      `json:"path"`
	Type string      `json:"type"` // "file", "dir" or "symlink"
	Mode fs.FileMode `json:"mode"` // permission bits
	Size int64       `json:"size,omitempty"`
	Link string      `json:"link,omitempty"`
}

// unsafe returns an ErrUnsafeArchive error.
func unsafe(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafeArchive, fmt.Sprintf(format, args...))
}

// decompress detects gzip, zstd or a plain tar stream by its magic bytes.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64*1024)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, unsafe("gzip: %v", err)
		}
		return zr, func() { _ = zr.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return nil, nil, unsafe("zstd: %v", err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// capped fails reads once more than n bytes went through.
type capped struct {
	r    io.Reader
	n    int64
	read int64
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	if c.read > c.n {
		return n, unsafe("archive unpacks to more than %d bytes", c.n)
	}
	return n, err
}

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// extract unpacks the selected members of the archive r into dst, an
// existing empty directory, and returns what it wrote.
//
// Every entry is checked, selected or not, and the first bad one stops the
// extraction with [ErrUnsafeArchive]: names must be relative without ".."
// components; only regular files, directories and symbolic links are
// accepted; a symbolic link's target must be relative and free of ".."
// (links may only point down, so no chain of them can leave the tree); sizes
// and counts stay within lim. All writes go through an [os.Root] opened on
// dst, so even a check missed here cannot write outside it. Files are
// written 0755 when the archive marks them executable, else 0644; owners,
// setuid/setgid/sticky bits and times are not kept. On error dst holds a
// partial tree the caller must remove.
func extract(ctx context.Context, r io.Reader, dst string, members []Member, lim Limits) ([]File, error) {
	lim = lim.withDefaults()
	zr, closeZ, err := decompress(r)
	if err != nil {
		return nil, err
	}
	defer closeZ()
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("open extraction root: %w", err)
	}
	defer root.Close()

	tr := tar.NewReader(ctxReader{ctx, &capped{r: zr, n: lim.MaxUnpacked}})
	var files []File
	seen := map[string]bool{}
	for count := 0; ; count++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, ErrUnsafeArchive) || ctx.Err() != nil {
				return nil, err
			}
			return nil, unsafe("read tar: %v", err)
		}
		if count >= lim.MaxEntries {
			return nil, unsafe("more than %d entries", lim.MaxEntries)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := checkHeader(h, lim)
		if err != nil {
			return nil, err
		}
		dest, ok := selectMember(name, h.Typeflag == tar.TypeDir, members)
		if !ok {
			continue
		}
		if seen[dest] {
			return nil, unsafe("duplicate entry %q", h.Name)
		}
		seen[dest] = true
		if dir := path.Dir(dest); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(dest, 0o755); err != nil {
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
			files = append(files, File{Path: dest, Type: "dir", Mode: 0o755})
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, dest); err != nil {
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
			files = append(files, File{Path: dest, Type: "symlink", Mode: 0o777, Link: h.Linkname})
		default: // regular file, checked by checkHeader
			mode := fs.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := root.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
			n, cerr := io.Copy(f, tr)
			err = errors.Join(cerr, f.Chmod(mode), f.Close())
			if err != nil {
				if errors.Is(cerr, ErrUnsafeArchive) || ctx.Err() != nil {
					return nil, cerr
				}
				if cerr != nil {
					return nil, unsafe("read %s: %v", h.Name, cerr)
				}
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
			files = append(files, File{Path: dest, Type: "file", Mode: mode, Size: n})
		}
	}
	// MkdirAll honours the umask; the tree is read by sandbox users other
	// than its owner, so every directory is made 0755 explicitly.
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return root.Chmod(p, 0o755)
	})
	if err != nil {
		return nil, fmt.Errorf("set directory modes: %w", err)
	}
	return files, nil
}

// checkHeader applies the archive rules to one entry and returns its
// cleaned relative name.
func checkHeader(h *tar.Header, lim Limits) (string, error) {
	raw := h.Name
	name, err := safetar.EntryName(raw)
	if err != nil {
		return "", unsafe("%v", err)
	}
	// Stricter than EntryName: no backslash anywhere, the tree is a CLI's.
	if strings.ContainsRune(raw, '\\') {
		return "", unsafe("entry name %q", raw)
	}
	if h.Size < 0 || h.Size > lim.MaxEntry {
		return "", unsafe("entry %q is %d bytes, over the %d byte limit", raw, h.Size, lim.MaxEntry)
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir: //nolint:staticcheck // old tars still write TypeRegA
	case tar.TypeSymlink:
		link := h.Linkname
		// Stricter than CheckLink: links may only point down, so no chain
		// of them can leave the tree (a lexical check cannot see that
		// "a/.." goes up from where link a leads), and no backslash.
		for part := range strings.SplitSeq(link, "/") {
			if part == ".." {
				return "", unsafe("symbolic link %q points up (%q)", raw, link)
			}
		}
		if strings.ContainsRune(link, '\\') {
			return "", unsafe("symbolic link %q points to %q", raw, link)
		}
		if err := safetar.CheckLink(name, link); err != nil {
			return "", unsafe("%v", err)
		}
	case tar.TypeLink:
		return "", unsafe("hard link %q", raw)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return "", unsafe("special file %q (type %q)", raw, string(h.Typeflag))
	default:
		return "", unsafe("entry %q has unsupported type %q", raw, string(h.Typeflag))
	}
	if name == "." {
		if h.Typeflag == tar.TypeDir {
			return name, nil
		}
		return "", unsafe("entry %q names the archive root", raw)
	}
	return name, nil
}

// selectMember maps a cleaned archive name to its destination in the
// installed tree, or reports that the entry is not wanted.
func selectMember(name string, isDir bool, members []Member) (string, bool) {
	for _, m := range members {
		if dir, ok := strings.CutSuffix(m.From, "/"); ok {
			rest, ok := strings.CutPrefix(name, dir+"/")
			if !ok || rest == "" {
				continue // the directory itself: created on demand
			}
			return path.Clean(m.To + rest), true
		}
		if name == m.From && !isDir {
			return m.To, true
		}
	}
	return "", false
}
