package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// DefaultSidecarUser is the sidecar's "uid:gid" when Sidecar.User is empty.
// It must differ from the lease user's uid: the pod shares one process
// namespace, and only another uid keeps the lease's processes out of the
// sidecar's /proc entries (environment, memory, open files).
const DefaultSidecarUser = "65532:65532"

// DefaultSidecarMemoryBytes is the sidecar container's memory limit.
const DefaultSidecarMemoryBytes = 512 << 20

// sidecarVolumeBytes is the size limit of the sidecar's own volume, which
// holds the copied program (the outpost executable, about 41 MB).
const sidecarVolumeBytes = 256 << 20

const (
	// sidecarContainer is the name of the pod's second container.
	sidecarContainer = "sidecar"
	// sidecarDir is the sidecar's own volume; the lease container does not
	// mount it.
	sidecarDir = "/outpost-sidecar"
	// sidecarBin is where the sidecar program is copied.
	sidecarBin = sidecarDir + "/program"
)

// Sidecar is a program run next to a lease, in a second container of its
// pod: it shares the pod's network (the lease reaches it on 127.0.0.1) and
// nothing else — not the lease's files, its environment or, running as
// another user, its processes. Outpost runs the model gateway there, so the
// credential the gateway holds never enters the lease.
//
// The program is copied in from this machine when the pod runs, started
// with Args, and kept running with its standard input and output connected
// to the caller ([SidecarStreams]) until the lease is released. Whatever
// the program needs that is secret goes over its standard input, so it is
// in no pod spec, Secret or environment.
type Sidecar struct {
	// Binary is the path of an executable on this machine built for the
	// nodes' operating system and architecture (statically linked, or
	// linked against the C library of the lease's image).
	Binary string
	// Args are the program's arguments.
	Args []string
	// User is the sidecar's "uid:gid". Empty: [DefaultSidecarUser]. Its
	// uid must not be root or the lease user's.
	User string
	// MemoryBytes limits the sidecar container's memory. Zero:
	// [DefaultSidecarMemoryBytes].
	MemoryBytes int64
}

// SidecarConn is the running sidecar program's standard streams.
type SidecarConn struct {
	// Stdin is the program's standard input; closing it closes the input.
	Stdin io.WriteCloser
	// Stdout is the program's standard output; it ends when the program
	// does or the lease is released.
	Stdout io.Reader
	stderr *leasekit.TailBuffer
}

// Stderr returns the last 4 KiB the program wrote to its standard error,
// for messages about a sidecar that failed.
func (c *SidecarConn) Stderr() string { return string(c.stderr.Bytes()) }

// SidecarStreams returns the sidecar streams of a lease acquired with
// [Provider.AcquireWithSidecar], also through wrappers that have an
// Unwrap() sandbox.Sandbox method; ok is false for any other sandbox.
func SidecarStreams(sb sandbox.Sandbox) (conn *SidecarConn, ok bool) {
	for {
		u, wraps := sb.(interface{ Unwrap() sandbox.Sandbox })
		if !wraps {
			break
		}
		sb = u.Unwrap()
	}
	l, isLease := sb.(*lease)
	if !isLease || l.sidecarConn == nil {
		return nil, false
	}
	return l.sidecarConn, true
}

// AcquireWithSidecar is [Provider.Acquire] for a pod that also runs sc
// (see [Sidecar]). The lease is returned once the program runs.
func (p *Provider) AcquireWithSidecar(ctx context.Context, spec sandbox.Spec, sc Sidecar) (sandbox.Sandbox, error) {
	if sc.User == "" {
		sc.User = DefaultSidecarUser
	}
	suid, _, err := parseUser(sc.User)
	if err != nil {
		return nil, err
	}
	luid, _, err := parseUser(cmp.Or(spec.User, p.opts.User))
	if err != nil {
		return nil, err
	}
	if suid == luid {
		return nil, outposterr.New(outposterr.Configuration,
			"sidecar user %s shares the lease user's uid: the lease could read the sidecar's processes", sc.User)
	}
	if sc.MemoryBytes < 0 {
		return nil, outposterr.New(outposterr.Configuration, "negative sidecar memory limit")
	}
	if sc.MemoryBytes == 0 {
		sc.MemoryBytes = DefaultSidecarMemoryBytes
	}
	fi, err := os.Stat(sc.Binary)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "sidecar program")
	}
	if !fi.Mode().IsRegular() {
		return nil, outposterr.New(outposterr.Configuration, "sidecar program %s is not a regular file", sc.Binary)
	}
	return p.acquire(ctx, spec, &sc)
}

// sidecarContainerFor is the pod's sidecar container: the lease's image,
// its own user and volume, a read-only root, no capabilities.
func sidecarContainerFor(sc *Sidecar, image string, pull corev1.PullPolicy, seccomp *corev1.SeccompProfile) (corev1.Container, error) {
	uid, gid, err := parseUser(sc.User)
	if err != nil {
		return corev1.Container{}, err
	}
	mem := corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(sc.MemoryBytes, resource.BinarySI)}
	sec := containerSecurity(uid, gid, seccomp)
	sec.ReadOnlyRootFilesystem = new(true)
	return corev1.Container{
		Name:                     sidecarContainer,
		Image:                    image,
		ImagePullPolicy:          pull,
		Command:                  []string{"sleep", "infinity"},
		WorkingDir:               sidecarDir,
		Env:                      []corev1.EnvVar{{Name: "HOME", Value: sidecarDir}, {Name: "TZ", Value: "UTC"}},
		Resources:                corev1.ResourceRequirements{Limits: mem},
		SecurityContext:          sec,
		VolumeMounts:             []corev1.VolumeMount{{Name: "sidecar", MountPath: sidecarDir}},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}, nil
}

// startSidecar copies the sidecar program into its container and starts
// it, its streams open until Release.
func (l *lease) startSidecar(ctx context.Context) error {
	f, err := os.Open(l.sidecar.Binary)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "sidecar program")
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, l.p.opts.StartTimeout)
	defer cancel()
	out := &leasekit.TailBuffer{Max: 4096}
	ex := l.executorIn(sidecarContainer, []string{"sh", "-c", `cat >"$1" && chmod 0755 "$1"`, "outpost-sidecar", sidecarBin}, true)
	if err := ex.StreamWithContext(cctx, remotecommand.StreamOptions{Stdin: f, Stdout: out, Stderr: out}); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("copy the sidecar program into pod %s: %w", l.name, ctx.Err())
		}
		return outposterr.Wrap(outposterr.Sandbox, err, "copy the sidecar program into pod %s: %s", l.name, out.Bytes())
	}

	inR, inW := io.Pipe()
	stdout := leasekit.NewPipe()
	conn := &SidecarConn{Stdin: inW, Stdout: stdout, stderr: &leasekit.TailBuffer{Max: 4096}}
	run := l.executorIn(sidecarContainer, append([]string{sidecarBin}, l.sidecar.Args...), true)
	go func() {
		// The stream lives as long as the lease: Release cancels l.ctx.
		err := run.StreamWithContext(l.ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: stdout, Stderr: conn.stderr})
		stdout.CloseWrite()
		_ = inR.CloseWithError(io.ErrClosedPipe)
		l.p.log.Debug("sidecar ended", "pod", l.name, "err", err)
	}()
	l.sidecarConn = conn
	return nil
}
