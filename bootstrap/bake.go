package bootstrap

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// LabelBaked is the image label listing the CLIs an image bakes in
// ("claude=2.1.328,codex=0.169.0").
const LabelBaked = "dev.outpost.clis"

// WriteBakeContext writes a Docker build context into dir (which must be
// empty) for an image FROM base that holds the verified trees of entries
// where every lease looks for them first (MountRoot/<name>/<version>, the
// path of [Entry.SandboxBin]). A lease on such an image needs no delivery:
// the copy-in delivery ([Bootstrapper.CopyInProvider]) finds the CLI there,
// checks its version, and copies nothing. It returns the Dockerfile's name.
func WriteBakeContext(dir, base string, entries ...*Entry) (string, error) {
	if base == "" || strings.ContainsAny(base, " \t\r\n") {
		return "", outposterr.New(outposterr.Configuration, "bake: base image %q", base)
	}
	var labels []string
	for _, e := range entries {
		if err := stageTree(filepath.Join(dir, "cli", e.Name, e.Version), e); err != nil {
			return "", outposterr.Wrap(outposterr.Bootstrap, err, "bake %s %s", e.Name, e.Version)
		}
		labels = append(labels, e.Name+"="+e.Version)
	}
	sort.Strings(labels)
	df := fmt.Sprintf("FROM %s\nCOPY cli/ %s/\nLABEL %s=%q\n", base, MountRoot, LabelBaked, strings.Join(labels, ","))
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "bake: write the Dockerfile")
	}
	return "Dockerfile", nil
}

// stageTree copies e's verified tree, file by file as its manifest lists
// it, into dst.
func stageTree(dst string, e *Entry) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range e.Manifest.Files {
		to := filepath.Join(dst, filepath.FromSlash(f.Path))
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return fmt.Errorf("manifest path %q is not local", f.Path)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch f.Type {
		case "dir":
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
		case "symlink":
			if err := os.Symlink(f.Link, to); err != nil {
				return err
			}
		case "file":
			if err := copyFile(to, filepath.Join(e.Dir, filepath.FromSlash(f.Path)), f.Size, f.Mode.Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(to, from string, size int64, mode os.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(dst, src, size); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Chmod(to, mode) // past the umask
}
