package leasekit

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Timeouts the container kinds' Options default to.
const (
	// DefaultPingTimeout bounds the probe of the engine (the Docker daemon,
	// the API server) in a kind's New.
	DefaultPingTimeout = 5 * time.Second
	// DefaultOpTimeout bounds each short engine call.
	DefaultOpTimeout = 30 * time.Second
	// DefaultReleaseTimeout bounds the removal of a lease in Release.
	DefaultReleaseTimeout = 30 * time.Second
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
