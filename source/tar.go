package source

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/outpost-dev/outpost/outposterr"
)

// ConfigDir is the project configuration directory a snapshot never
// carries into a lease (it may hold .env values).
const ConfigDir = ".outpost"

// ErrTooLarge is wrapped by Tar errors for a snapshot over its bounds.
var ErrTooLarge = errors.New("source too large")

// Tar streams the snapshot as a tar archive whose entry names are relative
// to its directory (the lease's workspace root receives them). Closing the
// reader stops the stream. A failure (a special file, a file over the
// bounds, a read error) ends the stream with that error.
func (s *Snapshot) Tar(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		err := s.write(ctx, pw)
		if err != nil {
			err = outposterr.Wrap(outposterr.Configuration, err, "copy source %s", s.Source)
		}
		_ = pw.CloseWithError(err)
	}()
	return pr
}

func (s *Snapshot) write(ctx context.Context, w io.Writer) error {
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	var total int64
	n := 0
	err = filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(s.Dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if rel == ConfigDir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if n++; n > s.maxN {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, s.maxN)
		}
		fi, err := d.Info() // Lstat: links are never followed
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		hdr := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case fi.Mode().IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			return tw.WriteHeader(hdr)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		case fi.Mode().IsRegular():
			if total += fi.Size(); total > s.max {
				return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.max)
			}
			// Opened beneath the root without following a link: a file
			// swapped for a link after the walk saw it is refused.
			f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			// The size was fixed by the header: a file that grew is cut,
			// one that shrank is an error.
			if _, err := io.Copy(tw, io.LimitReader(f, fi.Size())); err != nil {
				return err
			}
			return nil
		default:
			return fmt.Errorf("%s is not a regular file, directory or symbolic link", name)
		}
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
