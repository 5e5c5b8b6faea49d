package kubernetes

import (
	"cmp"
	"context"

	"github.com/outpost-dev/outpost/sandbox"
)

// WrapperArgv is the argv and the input header the provider runs for a
// command (no env, no workspace watch), for the benchmarks that time the
// wrapper over a raw exec.
func WrapperArgv(nonce string, args ...string) ([]string, []byte) {
	argv := append([]string{"sh", "-c", wrapperScript, "outpost-exec", "/tmp/outpost-bench-" + nonce, Root, "0"}, args...)
	return argv, header(nonce, nil)
}

// ContainerName is the lease container's name.
const ContainerName = containerName

// AcquireWithSidecarUnchecked is AcquireWithSidecar without the checks
// of the program's file, so that a test can hand it a FIFO and hold the
// sidecar's start back.
func (p *Provider) AcquireWithSidecarUnchecked(ctx context.Context, spec sandbox.Spec, sc Sidecar) (sandbox.Sandbox, error) {
	sc.User = cmp.Or(sc.User, DefaultSidecarUser)
	sc.MemoryBytes = cmp.Or(sc.MemoryBytes, DefaultSidecarMemoryBytes)
	return p.acquire(ctx, spec, &sc)
}
