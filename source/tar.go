package source

import (
	"archive/tar"
	"context"
	"io"

	"github.com/outpost-dev/outpost/internal/safetar"
	"github.com/outpost-dev/outpost/outposterr"
)

// ConfigDir is the project configuration directory a snapshot never
// carries into a lease (it may hold .env values).
const ConfigDir = ".outpost"

// ErrTooLarge is wrapped by Tar errors for a snapshot over its bounds.
var ErrTooLarge = safetar.ErrTooLarge

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
	tw := tar.NewWriter(w)
	err := safetar.Tree{
		Dir: s.Dir,
		Filter: func(name string, _ bool) (safetar.Pick, error) {
			if name == ConfigDir {
				return safetar.Prune, nil
			}
			return safetar.Keep, nil
		},
		// Names, types, permission bits, times and sizes only: no owners.
		Edit: func(h *tar.Header) {
			*h = tar.Header{Typeflag: h.Typeflag, Name: h.Name, Linkname: h.Linkname, Size: h.Size,
				Mode: h.Mode & 0o777, ModTime: h.ModTime, Format: tar.FormatPAX}
		},
		MaxEntries:    s.maxN,
		MaxBytes:      s.max,
		RefuseSpecial: true,
	}.Write(ctx, tw)
	if err != nil {
		return err
	}
	return tw.Close()
}
