package install

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
)

// PrivateFile is one file of the directory [WritePrivateDir] creates.
type PrivateFile struct {
	// Name is a plain file name, without a directory part.
	Name string
	Data []byte
}

// WritePrivateDir creates the directory dir in sb (0700) holding files
// (each 0600), through one tar stream copied into dir's parent, so the
// lease user owns them and no content appears on a command line. A name
// that is not a plain file name is refused before anything is copied.
func WritePrivateDir(ctx context.Context, sb sandbox.Sandbox, dir string, files []PrivateFile) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	base := path.Base(dir)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Name: base + "/", Mode: 0o700, Typeflag: tar.TypeDir, ModTime: now}); err != nil {
		return err
	}
	for _, f := range files {
		if f.Name == "" || f.Name != path.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return fmt.Errorf("file name %q must be a plain file name", f.Name)
		}
		if err := tw.WriteHeader(&tar.Header{Name: base + "/" + f.Name, Mode: 0o600, Size: int64(len(f.Data)),
			Typeflag: tar.TypeReg, ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return sb.CopyIn(ctx, path.Dir(dir), &buf)
}
