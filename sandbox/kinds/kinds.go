// Package kinds is the registry of the built-in sandbox kinds: one row
// per kind, each from the package that implements it — docker and podman
// from sandbox/docker, host from sandbox/host, kubernetes from
// sandbox/kubernetes. The outpost command (internal/cli) loops over a
// registry for --sandbox's help and the kinds' own flags, for doctor's
// engine checks and for gc's sweeps; the root package's Runner looks the
// chosen kind up by name in Options.Sandboxes (nil: [Builtin]) and drives
// it through its [sandbox.Engine]. Neither imports a kind package, so a
// caller (or a test) adds a kind with one row. The image helpers here
// ([BuildImage], [EnsureTaskImage], [RemoveTaskImages]) build on the
// Docker or Podman engine.
package kinds

import (
	"context"
	"io"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// Builtin returns a fresh registry of the built-in sandbox kinds.
func Builtin() sandbox.Kinds {
	t := sandbox.Kinds{}
	for _, k := range []sandbox.Kind{docker.Kind(), docker.PodmanKind(), host.Kind(), kubernetes.Kind()} {
		t[k.Name] = k
	}
	return t
}

// BuildImage builds the sandbox image tag from contextDir's dockerfile on
// the Docker engine that DOCKER_HOST names (getenv), printing the build's
// output to out (`outpost image build`).
func BuildImage(ctx context.Context, getenv func(string) string, contextDir, dockerfile, tag string, out io.Writer) error {
	return docker.BuildImageAt(ctx, getenv, contextDir, dockerfile, tag, out)
}

// EnsureTaskImage returns the tag of the task image built from
// contextDir's dockerfile for leases of the sandbox kind named kind ("":
// the default), building it once per content (docker.EnsureTaskImage):
// on Podman's service for podman, else on the Docker engine DOCKER_HOST
// names (for kubernetes the image must then reach the cluster's nodes).
// The host sandbox runs no image: a configuration error.
func EnsureTaskImage(ctx context.Context, kind string, getenv func(string) string, contextDir, dockerfile, version string, out io.Writer) (tag string, built bool, err error) {
	if kind == "host" {
		return "", false, outposterr.New(outposterr.Configuration,
			"the host sandbox runs no image, so it cannot run a task's environment: run in an isolated sandbox (docker, podman or kubernetes)")
	}
	return docker.EnsureTaskImageAt(ctx, getenv, kind == "podman", contextDir, dockerfile, version, out)
}

// RemoveTaskImages removes the task images of the engine the sandbox kind
// named kind builds them on (outpost gc --images).
func RemoveTaskImages(ctx context.Context, kind string, getenv func(string) string, dryRun bool) ([]sandbox.Leftover, error) {
	return docker.RemoveTaskImagesAt(ctx, getenv, kind == "podman", dryRun)
}
