// Package kinds is the registry of the built-in sandbox kinds: one row
// per kind, each from the package that implements it — docker and podman
// from sandbox/docker, host from sandbox/host, kubernetes from
// sandbox/kubernetes. The outpost command (internal/cli) loops over a
// registry for --sandbox's help and the kinds' own flags, for doctor's
// engine checks and for gc's sweeps; the root package's Runner looks the
// chosen kind up by name in Options.Sandboxes (nil: [Builtin]) and drives
// it through its [sandbox.Engine]. Neither imports a kind package, so a
// caller (or a test) adds a kind with one row. A row's TaskImages builds
// jobs' environments (kubernetes: on the Docker engine, then taken to the
// nodes); [BuildImage] builds the sandbox image on the Docker engine.
package kinds

import (
	"context"
	"io"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// Builtin returns a fresh registry of the built-in sandbox kinds.
func Builtin() sandbox.Kinds {
	t := sandbox.Kinds{}
	kube := kubernetes.Kind()
	// A pod's task image is built on the Docker engine (DOCKER_HOST); it
	// must then reach the cluster's nodes.
	kube.TaskImages = docker.TaskImagesOn(docker.DockerEndpoint)
	for _, k := range []sandbox.Kind{docker.Kind(), docker.PodmanKind(), host.Kind(), kube} {
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
