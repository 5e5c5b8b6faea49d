package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestTaskImage: a task's recipe is built once, tagged by its digest and
// labelled, then found again instead of rebuilt; a recipe whose step fails
// is a configuration error carrying the step's output.
func TestTaskImage(t *testing.T) {
	cli := engine(t)
	ctx := context.Background()
	dir := t.TempDir()
	marker := uuid.NewString()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"),
		[]byte("FROM "+docker.DefaultImage+"\nCOPY marker /marker\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "marker"), []byte(marker), 0o644))

	tag, built, err := docker.EnsureTaskImage(ctx, cli, dir, "Dockerfile", "v-test", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{PruneChildren: true}) })
	assert.True(t, built)
	digest, err := docker.RecipeDigest(dir, "Dockerfile")
	require.NoError(t, err)
	assert.Equal(t, docker.TaskImageTag(digest), tag)
	info, err := cli.ImageInspect(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, digest, info.Config.Labels[docker.LabelTaskImage])
	assert.Equal(t, "v-test", info.Config.Labels[docker.LabelVersion])

	again, built, err := docker.EnsureTaskImage(ctx, cli, dir, "Dockerfile", "v-test", nil)
	require.NoError(t, err)
	assert.Equal(t, tag, again)
	assert.False(t, built, "the image of the same recipe is reused")

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "Dockerfile"),
		[]byte("FROM "+docker.DefaultImage+"\nRUN echo step-said-"+marker+" && exit 3\n"), 0o644))
	_, _, err = docker.EnsureTaskImage(ctx, cli, bad, "Dockerfile", "", nil)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
	assert.Contains(t, err.Error(), "returned a non-zero code: 3")
	assert.Contains(t, err.Error(), "step-said-"+marker, "the build log's tail")
}
