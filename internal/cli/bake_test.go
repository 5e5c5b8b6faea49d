package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestImageBuildWithBakesCLIs: `outpost image build --with copilot` builds
// an image holding the verified Copilot CLI where leases look for it; a
// lease on it gets no copy (the CLI is found there and its version
// checked), while a lease on the plain image gets the copy.
func TestImageBuildWithBakesCLIs(t *testing.T) {
	testenv.Short(t)
	testenv.CLI(t, "copilot")
	requireDocker(t)
	ctx := context.Background()
	tag := "outpost/test-baked:" + strconv.Itoa(os.Getpid())
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	r := execute(t, "", env, "image", "build", "--with", "copilot", "--tag", tag)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Equal(t, tag+"\n", r.stdout)

	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	ins, err := cli.ImageInspect(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, "copilot=1.0.102", ins.Config.Labels[bootstrap.LabelBaked])

	var out bytes.Buffer
	f := testFactory(strings.NewReader(""), &out, &out, func(k string) string { return env[k] }, time.Now)
	b, err := newBootstrapper(ctx, f, BootstrapOptions{NoNet: true})
	require.NoError(t, err)
	e, err := b.Ensure(ctx, "copilot")
	require.NoError(t, err)
	p, err := docker.New(ctx, docker.Options{Version: "test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.ReleaseAll(context.Background()); _ = p.Close() })
	deliver := b.CopyInProvider(p, e, "/usr/local/bin:/usr/bin:/bin", "/tmp/outpost-cli")

	where := func(img string) string {
		sb, err := deliver.Acquire(ctx, sandbox.Spec{Image: img})
		require.NoError(t, err)
		defer func() { assert.NoError(t, sb.Release(context.Background())) }()
		proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c",
			"command -v copilot; if [ -e /tmp/outpost-cli/copilot ]; then echo copied; else echo not-copied; fi"}})
		require.NoError(t, err)
		b, _ := io.ReadAll(proc.Stdout())
		_, err = proc.Wait()
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "/opt/outpost/cli/copilot/1.0.102/copilot\nnot-copied\n", where(tag), "the baked CLI is used, nothing copied")
	assert.Equal(t, "/tmp/outpost-cli/copilot/1.0.102/copilot\ncopied\n", where(docker.DefaultImage), "the plain image gets the copy")

	r = execute(t, "", env, "image", "build", "--with", "copilot", "--dir", "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "give one of --dir and --with")
}
