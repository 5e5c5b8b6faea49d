package leasekit

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/outpost-dev/outpost/outposterr"
)

// WorkspaceDir is the absolute path of a lease spec's workspace, which must
// be an existing directory; "" stays "" (no workspace). Its errors are
// configuration errors.
func WorkspaceDir(workspace string) (string, error) {
	dir, _, err := StatWorkspace(workspace)
	return dir, err
}

// StatWorkspace is [WorkspaceDir] that also returns the directory's
// FileInfo (nil for no workspace).
func StatWorkspace(workspace string) (string, fs.FileInfo, error) {
	if workspace == "" {
		return "", nil, nil
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", nil, outposterr.Wrap(outposterr.Configuration, err, "workspace %q", workspace)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", nil, outposterr.Wrap(outposterr.Configuration, err, "workspace")
	}
	if !fi.IsDir() {
		return "", nil, outposterr.New(outposterr.Configuration, "workspace %q is not a directory", abs)
	}
	return abs, fi, nil
}
