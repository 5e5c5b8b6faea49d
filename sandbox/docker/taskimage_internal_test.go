package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecipeDigest: a recipe's digest depends on its contents, modes,
// names and Dockerfile path, not on file times, nor on what .dockerignore
// leaves out.
func TestRecipeDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("Dockerfile", "FROM x\n")
	write("files/a.txt", "a")
	write(".dockerignore", "ignored\n")
	digest := func() string {
		d, err := RecipeDigest(dir, "Dockerfile")
		require.NoError(t, err)
		return d
	}
	d0 := digest()
	assert.Len(t, d0, 64)
	assert.Equal(t, "outpost-task:"+d0[:20], TaskImageTag(d0))

	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "files/a.txt"), old, old))
	assert.Equal(t, d0, digest(), "times do not count")
	write("ignored", "anything")
	assert.Equal(t, d0, digest(), "ignored files do not count")

	write("files/a.txt", "b")
	d1 := digest()
	assert.NotEqual(t, d0, d1, "contents count")
	require.NoError(t, os.Chmod(filepath.Join(dir, "files/a.txt"), 0o755))
	assert.NotEqual(t, d1, digest(), "modes count")
	d2 := digest()
	write("Dockerfile.other", "FROM x\n")
	d3 := digest()
	assert.NotEqual(t, d2, d3, "a new file counts")
	other, err := RecipeDigest(dir, "Dockerfile.other")
	require.NoError(t, err)
	assert.NotEqual(t, d3, other, "which Dockerfile counts")
}

// TestTailLines: a failed build's error keeps the last lines of its output.
func TestTailLines(t *testing.T) {
	tl := &tailLines{max: 3}
	for i := range 5 {
		_, _ = tl.Write([]byte(strings.Repeat("x", i) + "line\n\n"))
	}
	_, _ = tl.Write([]byte("part"))
	_, _ = tl.Write([]byte("ial"))
	assert.Equal(t, "xxxline\nxxxxline\npartial", tl.String())
}

// fakeImages is an engine's image list for RemoveTaskImages.
type fakeImages struct {
	TaskImageClient
	list    []image.Summary
	inUse   map[string]bool
	removed []string
}

func (f *fakeImages) ImageList(_ context.Context, o image.ListOptions) ([]image.Summary, error) {
	if !o.Filters.ExactMatch("label", LabelTaskImage) && !o.Filters.Contains("label") {
		return nil, errors.New("unfiltered list")
	}
	return f.list, nil
}

func (f *fakeImages) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	if f.inUse[ref] {
		return nil, cerrdefs.ErrConflict.WithMessage("image is being used by a running container")
	}
	f.removed = append(f.removed, ref)
	return nil, nil
}

// TestRemoveTaskImages: gc --images removes the labelled images by tag,
// spares one a container uses, and removes nothing in a dry run.
func TestRemoveTaskImages(t *testing.T) {
	f := &fakeImages{list: []image.Summary{
		{ID: "sha256:aaa", RepoTags: []string{"outpost-task:a", "mine:a"}},
		{ID: "sha256:bbb", RepoTags: []string{"outpost-task:b"}},
		{ID: "sha256:ccc"},
	}, inUse: map[string]bool{"outpost-task:b": true}}
	left, err := RemoveTaskImages(context.Background(), f, true)
	require.NoError(t, err)
	require.Len(t, left, 3)
	assert.Empty(t, f.removed, "a dry run removes nothing")

	left, err = RemoveTaskImages(context.Background(), f, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"outpost-task:a", "mine:a", "sha256:ccc"}, f.removed)
	assert.True(t, left[0].Removed)
	assert.False(t, left[1].Removed)
	assert.Equal(t, "task image in use by a container", left[1].Reason)
	assert.True(t, left[2].Removed)
}
