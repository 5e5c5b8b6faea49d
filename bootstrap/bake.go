package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// LabelBaked is the image label listing the CLIs an image bakes in
// ("claude=2.1.328,codex=0.169.0").
const LabelBaked = "dev.outpost.clis"

// LabelGateway is the label of an image that bakes the outpost executable
// in for the gateway sidecar (WriteBakeContextWithGateway): its version,
// commit and SHA-256 ("v0.9.0 <commit> sha256:…"). A lease does not trust the label: it checks
// the file's own SHA-256 against the runner's executable.
const LabelGateway = "dev.outpost.gateway"

// WriteBakeContext writes a Docker build context into dir (which must be
// empty) for an image FROM base that holds the verified trees of entries
// where every lease looks for them first (MountRoot/<name>/<version>, the
// path of [Entry.SandboxBin]). A lease on such an image needs no delivery:
// the copy-in delivery ([Bootstrapper.CopyInProvider]) finds the CLI there,
// checks its version, and copies nothing. It returns the Dockerfile's name.
func WriteBakeContext(dir, base string, entries ...*Entry) (string, error) {
	return WriteBakeContextWithGateway(dir, base, Gateway{}, entries...)
}

// Gateway is an outpost executable to bake into an image.
type Gateway struct {
	// Binary is its path on this machine: a Linux build for the image's
	// architecture. Empty: nothing is baked.
	Binary string
	// Version is its version, recorded in the image's LabelGateway.
	Version string
}

// WriteBakeContextWithGateway is [WriteBakeContext] that also bakes gw's
// executable in at [sandbox.BakedGateway] (mode 0755), labelled
// LabelGateway: a Kubernetes gateway sidecar on such an image runs it from
// there when it is byte for byte the runner's executable, and copies
// nothing. Entries may then be empty.
func WriteBakeContextWithGateway(dir, base string, gw Gateway, entries ...*Entry) (string, error) {
	if base == "" || strings.ContainsAny(base, " \t\r\n") {
		return "", outposterr.New(outposterr.Configuration, "bake: base image %q", base)
	}
	if len(entries) == 0 && gw.Binary == "" {
		return "", outposterr.New(outposterr.Configuration, "bake: nothing to bake (no CLI, no gateway)")
	}
	df := "FROM " + base + "\n"
	var labels []string
	for _, e := range entries {
		if err := stageTree(filepath.Join(dir, "cli", e.Name, e.Version), e); err != nil {
			return "", outposterr.Wrap(outposterr.Bootstrap, err, "bake %s %s", e.Name, e.Version)
		}
		labels = append(labels, e.Name+"="+e.Version)
	}
	if len(entries) > 0 {
		sort.Strings(labels)
		df += fmt.Sprintf("COPY cli/ %s/\nLABEL %s=%q\n", MountRoot, LabelBaked, strings.Join(labels, ","))
	}
	if gw.Binary != "" {
		sum, err := stageGateway(filepath.Join(dir, "gateway"), gw.Binary)
		if err != nil {
			return "", outposterr.Wrap(outposterr.Configuration, err, "bake the gateway executable")
		}
		df += fmt.Sprintf("COPY gateway/outpost gateway/outpost%s %s/\nLABEL %s=%q\n", sandbox.BakedSumSuffix, path.Dir(sandbox.BakedGateway), LabelGateway,
			strings.TrimSpace(gw.Version+" sha256:"+sum))
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "bake: write the Dockerfile")
	}
	return "Dockerfile", nil
}

// stageGateway copies the executable bin to dir/outpost with mode 0755,
// hashing what it copies, stamps its SHA-256 (hex) into
// dir/outpost.sha256 (sandbox.BakedSumSuffix) and returns it.
func stageGateway(dir, bin string) (string, error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", bin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	to := filepath.Join(dir, "outpost")
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
		dst.Close()
		return "", err
	}
	if err := dst.Close(); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	stamp := to + sandbox.BakedSumSuffix
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Chmod(stamp, 0o644); err != nil {
		return "", err
	}
	return sum, os.Chmod(to, 0o755) // past the umask
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
