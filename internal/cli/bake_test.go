package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/internal/version"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
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

	ins := builtImage(t, tag)
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

// TestImageBuildWithGateway: `outpost image build --with-gateway` builds an
// image FROM the sandbox image holding this outpost executable, byte for
// byte, at the path a Kubernetes gateway sidecar runs it from, runnable by
// the sidecar's user, with its SHA-256 stamped next to it, and labelled
// with its version and SHA-256.
func TestImageBuildWithGateway(t *testing.T) {
	testenv.Short(t)
	requireDocker(t)
	ctx := context.Background()
	self := filepath.Join(t.TempDir(), "outpost")
	require.NoError(t, os.WriteFile(self, []byte("#!/bin/sh\necho MARK-baked-gateway \"$@\"\n"), 0o700))
	sum := sha256.Sum256(mustReadFile(t, self))
	tag := "outpost/test-gateway:" + strconv.Itoa(os.Getpid())
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	var out, errOut bytes.Buffer
	f := testFactory(strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] }, time.Now)
	f.Self = func() (string, error) { return self, nil }
	code := Execute(ctx, f, []string{"image", "build", "--with-gateway", "--tag", tag})
	require.Equal(t, 0, code, out.String()+errOut.String())
	assert.Equal(t, tag+"\n", out.String())

	ins := builtImage(t, tag)
	assert.Equal(t, Version+" "+version.Commit()+" sha256:"+hex.EncodeToString(sum[:]), ins.Config.Labels[bootstrap.LabelGateway])
	assert.Empty(t, ins.Config.Labels[bootstrap.LabelBaked], "no CLI baked")

	p, err := docker.New(ctx, docker.Options{Version: "test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.ReleaseAll(context.Background()); _ = p.Close() })
	sb, err := p.Acquire(ctx, sandbox.Spec{Image: tag, User: kubernetes.DefaultSidecarUser})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sb.Release(context.Background())) }()
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `sha256sum <"$1"; cat "$1.sha256"; "$1" sidecar`, "sh", sandbox.BakedGateway}})
	require.NoError(t, err)
	b, _ := io.ReadAll(proc.Stdout())
	_, err = proc.Wait()
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n"+hex.EncodeToString(sum[:])+"\nMARK-baked-gateway sidecar\n", string(b),
		"the executable, its SHA-256 stamped next to it, readable by the sidecar's user")
}

// TestImageBuildWithGatewayRefused: --with-gateway with a recipe directory,
// or without an executable to bake, is a configuration error.
func TestImageBuildWithGatewayRefused(t *testing.T) {
	r := execute(t, "", nil, "image", "build", "--with-gateway", "--dir", "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "give one of --dir and --with")
	r = execute(t, "", nil, "image", "build", "--with-gateway")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "--with-gateway")
}

// builtImage inspects the image tag, which the test's end removes.
func builtImage(t *testing.T, tag string) image.InspectResponse {
	t.Helper()
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	t.Cleanup(func() {
		c, err := docker.NewClient("")
		if err == nil {
			_, _ = c.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true})
			_ = c.Close()
		}
	})
	ins, err := cli.ImageInspect(context.Background(), tag)
	require.NoError(t, err)
	return ins
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
