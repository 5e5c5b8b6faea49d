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
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/outpost-dev/outpost/internal/safetar"
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
	return buildImage(ctx, cli, contextDir, dockerfile, buildOptions{tag: tag, failed: outposterr.Sandbox}, out)
}

// buildOptions tune buildImage.
type buildOptions struct {
	tag    string
	labels map[string]string
	// failed classes a build the engine ran and the recipe failed (a step
	// exited non-zero, a bad instruction, a missing base image); the
	// message then ends with the tail of the build's output.
	failed outposterr.Class
}

// buildTail is how many lines of build output a failed build's error keeps.
const buildTail = 20

func buildImage(ctx context.Context, cli ImageBuilder, contextDir, dockerfile string, o buildOptions, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	tag := o.tag
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
		pw.CloseWithError(writeContext(pw, contextDir, filepath.ToSlash(dockerfile), pm, false))
	}()
	defer pr.Close()
	resp, err := cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  filepath.ToSlash(dockerfile),
		Labels:      o.labels,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return engineError(err, "build image %s", tag)
	}
	defer resp.Body.Close()
	tail := &tailLines{max: buildTail}
	out = io.MultiWriter(out, tail)
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
			if t := tail.String(); t != "" {
				return outposterr.New(o.failed, "build image %s: %s; the build's last lines:\n%s", tag, strings.TrimSpace(msg), t)
			}
			return outposterr.New(o.failed, "build image %s: %s", tag, strings.TrimSpace(msg))
		}
		switch {
		case m.Stream != "":
			_, _ = io.WriteString(out, m.Stream)
		case m.Status != "":
			_, _ = fmt.Fprintln(out, m.Status, m.Progress)
		}
	}
}

// tailLines keeps the last max lines written to it.
type tailLines struct {
	max     int
	lines   []string
	partial string
}

func (t *tailLines) Write(p []byte) (int, error) {
	text := t.partial + string(p)
	parts := strings.Split(text, "\n")
	t.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		t.lines = append(t.lines, l)
		if len(t.lines) > t.max {
			t.lines = t.lines[1:]
		}
	}
	return len(p), nil
}

// String is the kept lines, the unfinished last one included.
func (t *tailLines) String() string {
	lines := t.lines
	if strings.TrimSpace(t.partial) != "" {
		lines = append(lines[:len(lines):len(lines)], t.partial)
	}
	return strings.Join(lines[max(len(lines)-t.max, 0):], "\n")
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
// With stable, times are left out, so the stream depends only on the
// names, modes, link targets and contents: its hash names a recipe.
func writeContext(w io.Writer, contextDir, dockerfile string, pm *patternmatcher.PatternMatcher, stable bool) error {
	tw := tar.NewWriter(w)
	err := safetar.Tree{
		Dir: contextDir,
		Filter: func(name string, isDir bool) (safetar.Pick, error) {
			if pm == nil || name == dockerfile || name == ".dockerignore" {
				return safetar.Keep, nil
			}
			skip, err := pm.MatchesOrParentMatches(name)
			switch {
			case err != nil || !skip:
				return safetar.Keep, err
			case isDir && !pm.Exclusions():
				return safetar.Prune, nil
			}
			return safetar.Omit, nil
		},
		Edit: func(hdr *tar.Header) {
			hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
			if stable {
				hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}, time.Time{}
				hdr.PAXRecords = nil
			}
		},
	}.Write(context.Background(), tw)
	if err != nil {
		return fmt.Errorf("write build context: %w", err)
	}
	return tw.Close()
}
