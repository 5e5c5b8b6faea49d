package leasekit

import (
	"os"
	"path/filepath"

	"github.com/outpost-dev/outpost/outposterr"
)

// WorkspaceDir is the absolute path of a lease spec's workspace, which must
// be an existing directory; "" stays "" (no workspace). Its errors are
// configuration errors.
func WorkspaceDir(workspace string) (string, error) {
	if workspace == "" {
		return "", nil
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "workspace %q", workspace)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "workspace")
	}
	if !fi.IsDir() {
		return "", outposterr.New(outposterr.Configuration, "workspace %q is not a directory", abs)
	}
	return abs, nil
}
