package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
// The program is copied in from this machine when the pod runs (unless the
// lease's image holds the same file at Baked), started with Args, and kept
// running with its standard input and output connected
// to the caller ([SidecarStreams]) until the lease is released. Whatever
// the program needs that is secret goes over its standard input, so it is
// in no pod spec, Secret or environment.
type Sidecar struct {
	// Binary is the path of an executable on this machine built for the
	// nodes' operating system and architecture (statically linked, or
	// linked against the C library of the lease's image).
	Binary string
	// Baked is where the lease's image may hold a copy of Binary (outpost
	// image build --with-gateway puts the outpost executable at
	// sandbox.BakedGateway). When the file there has Binary's SHA-256, the
	// sidecar runs it from the image and nothing is copied; when it is
	// missing or differs in any byte, Binary is copied as without Baked.
	// Empty: always copy.
	Baked string
	// Args are the program's arguments.
	Args []string
	// User is the sidecar's "uid:gid". Empty: [DefaultSidecarUser]. Its
	// uid must not be root or the lease user's.
	User string
	// MemoryBytes limits the sidecar container's memory. Zero:
	// [DefaultSidecarMemoryBytes].
	MemoryBytes int64

	sum string // Binary's SHA-256 (hex), when Baked is set
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
	if sc.Baked != "" {
		if sc.sum, err = p.fileSum(sc.Binary, fi); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "sidecar program")
		}
	}
	return p.acquire(ctx, spec, &sc)
}

// fileSum is the hex SHA-256 of the file at path (fi its stat), cached
// while its size and modification time stay the same.
func (p *Provider) fileSum(path string, fi os.FileInfo) (string, error) {
	key := fileKey{path: path, size: fi.Size(), mod: fi.ModTime()}
	return cached(&p.mu, &p.sums, key, func() (string, error) {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	})
}

// fileKey identifies a version of a file for fileSum's cache.
type fileKey struct {
	path string
	size int64
	mod  time.Time
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

// bakedMark is what bakedScript prints before it runs the image's copy of
// the sidecar program.
const bakedMark = "outpost-sidecar-baked"

// bakedScript runs the sidecar program from the image when the file at $1
// has the SHA-256 $2: it prints bakedMark on stdout first and execs it with
// the rest of the arguments. Otherwise (no such file, another file) it
// prints nothing and exits 97, and the program is copied in instead. The
// file is hashed through a redirect, so the exec's standard input (the
// program's) is left untouched.
const bakedScript = `[ -f "$1" ] && [ "$(sha256sum <"$1" 2>/dev/null)" = "$2  -" ] || exit 97
p=$1; shift 2
echo ` + bakedMark + `
exec "$p" "$@"`

// startSidecar starts the sidecar program, its streams open until Release:
// the image's copy when it is Binary's (Sidecar.Baked), else Binary copied
// into the sidecar's volume.
func (l *lease) startSidecar(ctx context.Context) error {
	if l.sidecar.Baked != "" {
		started, err := l.startBaked(ctx)
		if started || err != nil {
			return err
		}
	}
	l.p.log.Debug("sidecar program copied in", "pod", l.name, "baked", l.sidecar.Baked)
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

	l.sidecarConn = l.runSidecar(append([]string{sidecarBin}, l.sidecar.Args...))
	return nil
}

// runSidecar runs argv in the sidecar container, its streams open until
// Release, and returns them.
func (l *lease) runSidecar(argv []string) *SidecarConn {
	inR, inW := io.Pipe()
	stdout := leasekit.NewPipe()
	conn := &SidecarConn{Stdin: inW, Stdout: stdout, stderr: &leasekit.TailBuffer{Max: 4096}}
	run := l.executorIn(sidecarContainer, argv, true)
	go func() {
		// The stream lives as long as the lease: Release cancels l.ctx.
		err := run.StreamWithContext(l.ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: stdout, Stderr: conn.stderr})
		stdout.CloseWrite()
		_ = inR.CloseWithError(io.ErrClosedPipe)
		l.p.log.Debug("sidecar ended", "pod", l.name, "err", err)
	}()
	return conn
}

// startBaked starts the image's copy of the sidecar program when it is
// Binary's: started is false (and err nil) when the image holds no such
// file, and the program is then to be copied.
func (l *lease) startBaked(ctx context.Context) (started bool, err error) {
	conn := l.runSidecar(append([]string{"sh", "-c", bakedScript, "outpost-sidecar", l.sidecar.Baked, l.sidecar.sum},
		l.sidecar.Args...))
	cctx, cancel := context.WithTimeout(ctx, l.p.opts.StartTimeout)
	defer cancel()
	marked := make(chan error, 1)
	go func() { marked <- readMark(conn.Stdout, bakedMark) }()
	select {
	case err = <-marked:
	case <-cctx.Done():
		_ = conn.Stdin.Close()
		if ctx.Err() != nil {
			return false, fmt.Errorf("start the sidecar program in pod %s: %w", l.name, ctx.Err())
		}
		return false, outposterr.New(outposterr.Sandbox, "start the sidecar program in pod %s: no answer within %s", l.name, l.p.opts.StartTimeout)
	}
	if err != nil {
		// The check found no copy of Binary in the image (its stream
		// ended unmarked).
		_ = conn.Stdin.Close()
		l.p.log.Debug("sidecar program not in the image", "pod", l.name, "path", l.sidecar.Baked, "check", err, "stderr", conn.Stderr())
		return false, nil
	}
	l.p.log.Debug("sidecar program run from the image", "pod", l.name, "path", l.sidecar.Baked)
	l.sidecarConn = conn
	return true, nil
}

// errUnmarked: a stream ended or went on without the expected first line.
var errUnmarked = errors.New("no mark")

// readMark reads r up to its first newline, one byte at a time so nothing
// after it is consumed, and succeeds when that line is mark.
func readMark(r io.Reader, mark string) error {
	line := make([]byte, 0, len(mark)+1)
	b := make([]byte, 1)
	for len(line) <= len(mark) {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				if string(line) == mark {
					return nil
				}
				return errUnmarked
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errUnmarked, err)
		}
	}
	return errUnmarked
}
