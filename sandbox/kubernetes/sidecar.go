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
	"strconv"
	"strings"
	"sync"
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
	// sandbox.BakedGateway). When the file there is Binary's — its stamp
	// next to it (Baked+sandbox.BakedSumSuffix) holds Binary's SHA-256
	// and its size is Binary's, or, without a stamp, it has Binary's
	// SHA-256 — the sidecar runs it from the image and nothing is copied;
	// when it is missing or differs, Binary is copied as without Baked.
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

	sum  string // Binary's SHA-256 (hex), when Baked is set
	size int64  // Binary's size
}

// SidecarConn is the sidecar program's standard streams. The lease is
// returned while the program is still being started (checked in the image
// or copied in, see [Provider.AcquireWithSidecar]): writes and reads wait
// for that start ([SidecarConn.Started]) and fail with its error.
type SidecarConn struct {
	// Stdin is the program's standard input; closing it closes the input.
	Stdin io.WriteCloser
	// Stdout is the program's standard output; it ends when the program
	// does or the lease is released.
	Stdout io.Reader

	started chan struct{} // closed when the start is over
	mu      sync.Mutex
	run     *sidecarRun // the running program; nil until started, or when the start failed
	err     error       // why the start failed
	closed  bool        // Stdin was closed, maybe before the start was over
}

// newSidecarConn is the streams of a sidecar program whose start is under
// way; finish ends the start.
func newSidecarConn() *SidecarConn {
	c := &SidecarConn{started: make(chan struct{})}
	c.Stdin, c.Stdout = sidecarStdin{c}, sidecarStdout{c}
	return c
}

// finish records the start's outcome: the running program, or err.
func (c *SidecarConn) finish(run *sidecarRun, err error) {
	c.mu.Lock()
	c.run, c.err = run, err
	closed := c.closed
	c.mu.Unlock()
	close(c.started)
	if closed && run != nil {
		_ = run.stdin.Close()
	}
}

// Started waits until the program runs and returns nil, or returns why it
// could not be started (a sandbox error), or ctx's error.
func (c *SidecarConn) Started(ctx context.Context) error {
	select {
	case <-c.started:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure says why the program no longer serves the lease: its start
// failed, or it ended before the lease was released. "" while it starts or
// runs. It does not wait.
func (c *SidecarConn) failure() string {
	select {
	case <-c.started:
	default:
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return "its sidecar program did not start: " + c.err.Error()
	}
	if c.run == nil || c.run.ended == nil {
		return ""
	}
	select {
	case <-c.run.ended:
		why := "its sidecar program ended"
		if tail := strings.TrimSpace(string(c.run.stderr.Bytes())); tail != "" {
			why += ": " + tail
		}
		return why
	default:
		return ""
	}
}

// running waits for the start and returns the running program.
func (c *SidecarConn) running() (*sidecarRun, error) {
	<-c.started
	return c.run, c.err
}

// Stderr returns the last 4 KiB the program wrote to its standard error,
// or why it could not be started, for messages about a sidecar that failed.
func (c *SidecarConn) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err.Error()
	}
	if c.run == nil {
		return ""
	}
	return string(c.run.stderr.Bytes())
}

type sidecarStdin struct{ c *SidecarConn }

func (w sidecarStdin) Write(p []byte) (int, error) {
	run, err := w.c.running()
	if err != nil {
		return 0, err
	}
	return run.stdin.Write(p)
}

// Close closes the program's input; closed before the program runs, it
// closes it as soon as it does, without waiting for the start.
func (w sidecarStdin) Close() error {
	w.c.mu.Lock()
	w.c.closed = true
	run := w.c.run
	w.c.mu.Unlock()
	if run != nil {
		return run.stdin.Close()
	}
	return nil
}

type sidecarStdout struct{ c *SidecarConn }

func (r sidecarStdout) Read(p []byte) (int, error) {
	run, err := r.c.running()
	if err != nil {
		return 0, err
	}
	return run.stdout.Read(p)
}

// sidecarRun is one exec in the sidecar container, its streams open until
// Release.
type sidecarRun struct {
	stdin  *io.PipeWriter
	stdout io.Reader
	stderr *leasekit.TailBuffer
	ended  chan struct{} // closed when the program's exec stream ended; nil in tests that never end
}

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
// (see [Sidecar]). The lease is returned once the pod runs and its
// workspace is in, while the program is still being started (the image's
// copy checked, or the program copied in): that start overlaps with what
// the caller does next (a CLI copied in). The program's streams
// ([SidecarStreams]) wait for it; [SidecarConn.Started] says when it runs
// or why it could not be started.
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
		sc.size = fi.Size()
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
// is Binary's: its stamp ($1.sha256, written by outpost image build
// --with-gateway) says the SHA-256 $2 and its size is $3 bytes, or, with
// no stamp (an image baked before stamps), sha256sum of the file says $2.
// It then prints bakedMark on stdout and execs the file with the rest of
// the arguments. Otherwise (no such file, another file or stamp) it prints
// nothing and exits 97, and the program is copied in instead. The stamp
// is the image's word, as sha256sum in the image would be: the image is
// trusted either way; both catch an image that holds another build. The
// file is only read through redirects, so the exec's standard input (the
// program's) is left untouched.
const bakedScript = `[ -f "$1" ] || exit 97
if [ -f "$1` + sandbox.BakedSumSuffix + `" ]; then
	[ "$(cat "$1` + sandbox.BakedSumSuffix + `" 2>/dev/null)" = "$2" ] && [ "$(wc -c <"$1" | tr -d ' ')" = "$3" ] || exit 97
else
	[ "$(sha256sum <"$1" 2>/dev/null)" = "$2  -" ] || exit 97
fi
p=$1; shift 3
echo ` + bakedMark + `
exec "$p" "$@"`

// startSidecar starts the sidecar program, its streams open until Release:
// the image's copy when it is Binary's (Sidecar.Baked), else Binary copied
// into the sidecar's volume.
func (l *lease) startSidecar(ctx context.Context) (*sidecarRun, error) {
	if l.sidecar.Baked != "" {
		run, err := l.startBaked(ctx)
		if run != nil || err != nil {
			return run, err
		}
	}
	l.p.log.Debug("sidecar program copied in", "pod", l.name, "baked", l.sidecar.Baked)
	f, err := os.Open(l.sidecar.Binary)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "sidecar program")
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, l.p.opts.StartTimeout)
	defer cancel()
	out := &leasekit.TailBuffer{Max: 4096}
	ex := l.executorIn(sidecarContainer, []string{"sh", "-c", `cat >"$1" && chmod 0755 "$1"`, "outpost-sidecar", sidecarBin}, true)
	if err := ex.StreamWithContext(cctx, remotecommand.StreamOptions{Stdin: f, Stdout: out, Stderr: out}); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("copy the sidecar program into pod %s: %w", l.name, ctx.Err())
		}
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "copy the sidecar program into pod %s: %s", l.name, out.Bytes())
	}
	return l.runSidecar(append([]string{sidecarBin}, l.sidecar.Args...)), nil
}

// runSidecar runs argv in the sidecar container, its streams open until
// Release, and returns them.
func (l *lease) runSidecar(argv []string) *sidecarRun {
	inR, inW := io.Pipe()
	stdout := leasekit.NewPipe()
	run := &sidecarRun{stdin: inW, stdout: stdout, stderr: &leasekit.TailBuffer{Max: 4096}, ended: make(chan struct{})}
	ex := l.executorIn(sidecarContainer, argv, true)
	go func() {
		// The stream lives as long as the lease: Release cancels l.ctx.
		err := ex.StreamWithContext(l.ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: stdout, Stderr: run.stderr})
		close(run.ended) // before the output's end, which readers see
		stdout.CloseWrite()
		_ = inR.CloseWithError(io.ErrClosedPipe)
		l.p.log.Debug("sidecar ended", "pod", l.name, "err", err)
	}()
	return run
}

// startBaked starts the image's copy of the sidecar program when it is
// Binary's: run is nil (and err nil) when the image holds no such file,
// and the program is then to be copied.
func (l *lease) startBaked(ctx context.Context) (run *sidecarRun, err error) {
	run = l.runSidecar(append([]string{"sh", "-c", bakedScript, "outpost-sidecar", l.sidecar.Baked, l.sidecar.sum, strconv.FormatInt(l.sidecar.size, 10)},
		l.sidecar.Args...))
	cctx, cancel := context.WithTimeout(ctx, l.p.opts.StartTimeout)
	defer cancel()
	marked := make(chan error, 1)
	go func() { marked <- readMark(run.stdout, bakedMark) }()
	select {
	case err = <-marked:
	case <-cctx.Done():
		_ = run.stdin.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("start the sidecar program in pod %s: %w", l.name, ctx.Err())
		}
		return nil, outposterr.New(outposterr.Sandbox, "start the sidecar program in pod %s: no answer within %s", l.name, l.p.opts.StartTimeout)
	}
	if err != nil {
		// The check found no copy of Binary in the image (its stream
		// ended unmarked).
		_ = run.stdin.Close()
		l.p.log.Debug("sidecar program not in the image", "pod", l.name, "path", l.sidecar.Baked, "check", err, "stderr", string(run.stderr.Bytes()))
		return nil, nil
	}
	l.p.log.Debug("sidecar program run from the image", "pod", l.name, "path", l.sidecar.Baked)
	return run, nil
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
