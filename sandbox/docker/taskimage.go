package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/outpost-dev/outpost/outposterr"
)

// Task images: a task's environment (a Dockerfile and its build context)
// built once per content and reused.
const (
	// TaskImageRepo is the repository of task images' tags:
	// outpost-task:<the first 20 hex digits of the recipe's hash>.
	TaskImageRepo = "outpost-task"
	// LabelTaskImage is on every task image; its value is the recipe's
	// full hash. Containers inherit it; the reaper does not list by it.
	LabelTaskImage = "dev.outpost.task-image"
)

// TaskImageClient is the part of the engine API task images use.
type TaskImageClient interface {
	ImageBuilder
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

// RecipeDigest is the hex SHA-256 of a build recipe: the build context
// contextDir as the engine would receive it (its .dockerignore applied),
// times left out, and the Dockerfile's path in it. Touching a file
// changes nothing; changing a byte, a mode or a name changes it.
func RecipeDigest(contextDir, dockerfile string) (string, error) {
	pm, err := ignoreMatcher(contextDir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "outpost task image v1\x00%s\x00", filepath.ToSlash(dockerfile))
	if err := writeContext(h, contextDir, filepath.ToSlash(dockerfile), pm, true); err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "read the build context %s", contextDir)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TaskImageTag is the tag of the task image of a recipe digest.
func TaskImageTag(digest string) string { return TaskImageRepo + ":" + digest[:20] }

// EnsureTaskImage returns the tag of the task image built from
// contextDir's dockerfile (a path inside it), building it only when no
// image has that tag yet (built reports whether it did). The image is
// labelled [LabelTaskImage] and [LabelVersion] (version). A recipe the
// engine ran and that failed is a configuration error ending with the tail
// of the build's output; an engine that cannot be reached or fails is a
// sandbox error. Build output goes to out (nil: discarded).
func EnsureTaskImage(ctx context.Context, cli TaskImageClient, contextDir, dockerfile, version string, out io.Writer) (tag string, built bool, err error) {
	digest, err := RecipeDigest(contextDir, dockerfile)
	if err != nil {
		return "", false, err
	}
	tag = TaskImageTag(digest)
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		return tag, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", false, engineError(err, "look up image %s", tag)
	}
	if version == "" {
		version = "dev"
	}
	err = buildImage(ctx, cli, contextDir, dockerfile, buildOptions{tag: tag, failed: outposterr.Configuration,
		labels: map[string]string{LabelTaskImage: digest, LabelVersion: version}}, out)
	if err != nil {
		return "", false, err
	}
	return tag, true, nil
}

// RemoveTaskImages removes the task images ([LabelTaskImage]) on the
// engine, or only lists them with dryRun. An image a container still uses
// is left, with that reason; it is not an error.
func RemoveTaskImages(ctx context.Context, cli TaskImageClient, dryRun bool) ([]Leftover, error) {
	list, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelTaskImage))})
	if err != nil {
		return nil, engineError(err, "list task images")
	}
	var out []Leftover
	var errs []error
	for _, im := range list {
		name := shortID(im.ID)
		if len(im.RepoTags) > 0 {
			name = im.RepoTags[0]
		}
		lo := Leftover{Kind: "image", ID: im.ID, Name: name, Labels: im.Labels, Reason: "task image"}
		if !dryRun {
			// By tag (an image tagged twice cannot be removed by id
			// without force, which would not spare one in use).
			refs := im.RepoTags
			if len(refs) == 0 {
				refs = []string{im.ID}
			}
			var err error
			for _, ref := range refs {
				if _, err = cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
					break
				}
			}
			switch {
			case err == nil, cerrdefs.IsNotFound(err):
				lo.Removed = true
			case cerrdefs.IsConflict(err):
				lo.Reason = "task image in use by a container"
			default:
				errs = append(errs, engineError(err, "remove image %s", name))
			}
		}
		out = append(out, lo)
	}
	return out, errors.Join(errs...)
}
