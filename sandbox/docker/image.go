package docker

import (
	"archive/tar"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/build"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/outpost-dev/outpost/outposterr"
)

// ImageBuilder is the part of the engine API [BuildImage] uses.
type ImageBuilder interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
}

// BuildImage builds the image recipe dockerfile (a path relative to
// contextDir, e.g. "Dockerfile") with contextDir as the build context and
// tags it tag (e.g. [DefaultImage]). Files matched by contextDir/.dockerignore
// are not sent (the Dockerfile and .dockerignore always are), so the
// project's .outpost/.env never reaches the engine. The classic builder is
// requested because it resolves FROM against local images without a
// registry. Build output is written to out (nil: discarded). A failed build
// is a [outposterr.Sandbox] error carrying the builder's message.
func BuildImage(ctx context.Context, cli ImageBuilder, contextDir, dockerfile, tag string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if filepath.IsAbs(dockerfile) || !filepath.IsLocal(dockerfile) {
		return outposterr.New(outposterr.Configuration, "dockerfile %q must be a path inside the build context", dockerfile)
	}
	if _, err := os.Stat(filepath.Join(contextDir, dockerfile)); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "image recipe")
	}
	pm, err := ignoreMatcher(contextDir)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeContext(pw, contextDir, filepath.ToSlash(dockerfile), pm))
	}()
	defer pr.Close()
	resp, err := cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  filepath.ToSlash(dockerfile),
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return engineError(err, "build image %s", tag)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Progress    string `json:"progress"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return engineError(err, "build image %s: read progress", tag)
		}
		if msg := cmp.Or(m.ErrorDetail.Message, m.Error); msg != "" {
			return outposterr.New(outposterr.Sandbox, "build image %s: %s", tag, msg)
		}
		switch {
		case m.Stream != "":
			_, _ = io.WriteString(out, m.Stream)
		case m.Status != "":
			_, _ = fmt.Fprintln(out, m.Status, m.Progress)
		}
	}
}

// ignoreMatcher reads contextDir/.dockerignore, if any.
func ignoreMatcher(contextDir string) (*patternmatcher.PatternMatcher, error) {
	f, err := os.Open(filepath.Join(contextDir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read .dockerignore")
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read .dockerignore")
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "parse .dockerignore")
	}
	return pm, nil
}

// writeContext writes contextDir as a tar stream, skipping ignored paths.
// Regular files, directories and symlinks are sent with their modes; the
// owner is root, as the classic builder expects.
func writeContext(w io.Writer, contextDir, dockerfile string, pm *patternmatcher.PatternMatcher) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(contextDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(contextDir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		if pm != nil && name != dockerfile && name != ".dockerignore" {
			skip, err := pm.MatchesOrParentMatches(name)
			if err != nil {
				return err
			}
			if skip {
				if d.IsDir() && !pm.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular(), info.IsDir():
		default:
			return nil // sockets, devices, fifos: not part of a recipe
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write build context: %w", err)
	}
	return tw.Close()
}
