package kubernetes_test

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// sidecarScript is the sidecar program of these tests: it serves a line on
// the pod's loopback, reads a secret from its standard input into its own
// memory and volume, and answers each later line.
const sidecarScript = `#!/bin/sh
port=$1
socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork SYSTEM:'echo from-the-sidecar' &
echo ready
read -r secret
printf '%s\n' "$secret" >/outpost-sidecar/held
echo held
while read -r line; do echo "got:$line"; done
echo bye
`

func acquireWithSidecar(t *testing.T, p *kubernetes.Provider, spec sandbox.Spec, sc kubernetes.Sidecar) sandbox.Sandbox {
	t.Helper()
	return acquireWith(t, func(ctx context.Context) (sandbox.Sandbox, error) { return p.AcquireWithSidecar(ctx, spec, sc) })
}

// TestSidecar runs a program beside a lease: it shares the pod's loopback
// with the lease, talks to the caller over its standard streams, and what
// it holds — a secret read from its input, kept in its memory and its own
// volume — is out of the lease's reach: not in any process environment or
// command line the lease can read, not under /proc/PID/root of the
// sidecar's processes, not on a volume the lease mounts, not in the pod
// spec. Release ends its output.
func TestSidecar(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	bin := filepath.Join(t.TempDir(), "sidecar")
	require.NoError(t, os.WriteFile(bin, []byte(sidecarScript), 0o755))
	port := 20000 + rand.IntN(20000)
	secret := "outpost-sidecar-marker-" + strconv.Itoa(rand.Int())
	sb := acquireWithSidecar(t, p, sandbox.Spec{}, kubernetes.Sidecar{Binary: bin, Args: []string{strconv.Itoa(port)}})

	conn, ok := kubernetes.SidecarStreams(sb)
	require.True(t, ok)
	lines := bufio.NewScanner(conn.Stdout)
	next := func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(time.Minute):
			t.Fatal("no line from the sidecar")
			return ""
		}
	}
	require.Equal(t, "ready", next(), conn.Stderr())
	_, err := conn.Stdin.Write([]byte(secret + "\n"))
	require.NoError(t, err)
	require.Equal(t, "held", next(), conn.Stderr())
	_, err = conn.Stdin.Write([]byte("ping\n"))
	require.NoError(t, err)
	require.Equal(t, "got:ping", next())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The lease reaches the sidecar on its own loopback.
	r := run(ctx, t, sb, sh(`for i in 1 2 3 4 5 6 7 8 9 10; do timeout 5 socat -u TCP:127.0.0.1:$1 - && exit 0; sleep 0.5; done; exit 1`, strconv.Itoa(port)))
	require.Zero(t, r.status.Code, r.stderr)
	assert.Equal(t, "from-the-sidecar\n", r.stdout)

	// What the lease can read: the environments and command lines of every
	// process it sees, their roots, and every writable place of its own.
	// The secret is not given to this command: everything it prints is
	// searched for it here.
	r = run(ctx, t, sb, sh(`for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f" 2>/dev/null; echo; done
cat /proc/[0-9]*/root/outpost-sidecar/held 2>/dev/null
ls /outpost-sidecar 2>&1
find /home /workspace /tmp /var/tmp /dev/shm /run -type f -size -4M -exec cat {} + 2>/dev/null
true`))
	require.NoError(t, r.err)
	assert.Contains(t, r.stdout, "/outpost-sidecar/program", "the lease sees the sidecar's processes (shared process namespace)")
	assert.NotContains(t, r.stdout, secret, "the sidecar's secret reached the lease")
	assert.Contains(t, r.stdout, "No such file", "the sidecar's volume is not in the lease")

	pod := getPod(t, clientset(t), p.Namespace(), sb.ID())
	require.NotNil(t, pod)
	require.Len(t, pod.Spec.Containers, 2)
	side := pod.Spec.Containers[1]
	assert.Equal(t, int64(65532), *side.SecurityContext.RunAsUser)
	assert.True(t, *side.SecurityContext.ReadOnlyRootFilesystem)
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		assert.NotEqual(t, "sidecar", m.Name, "the lease does not mount the sidecar's volume")
	}

	require.NoError(t, sb.Release(ctx))
	done := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the sidecar's output did not end with the lease")
	}
}

// TestSidecarRefused: a sidecar with the lease's uid, as root, or with a
// program that does not exist is a configuration error before any pod is
// made.
func TestSidecarRefused(t *testing.T) {
	runID := "sidecar-refused-" + strconv.Itoa(rand.IntN(1<<30))
	p := newProvider(t, kubernetes.Options{RunID: runID})
	bin := filepath.Join(t.TempDir(), "sidecar")
	require.NoError(t, os.WriteFile(bin, []byte(sidecarScript), 0o755))
	ctx := context.Background()
	for name, sc := range map[string]kubernetes.Sidecar{
		"lease uid": {Binary: bin, User: kubernetes.DefaultUser},
		"root":      {Binary: bin, User: "0:0"},
		"missing":   {Binary: bin + "-missing"},
		"directory": {Binary: filepath.Dir(bin)},
	} {
		_, err := p.AcquireWithSidecar(ctx, sandbox.Spec{}, sc)
		require.Error(t, err, name)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: %v", name, err)
	}
	assert.Empty(t, podsOfRun(t, p, runID), "no pod was made")
}

// TestSidecarBaked: a sidecar whose program the image already holds at
// Sidecar.Baked, byte for byte, runs from the image and nothing is copied;
// a file there that differs, or none, gets the program copied in and run
// from the sidecar's volume. Either way it talks over its streams. The
// image's own cat stands in for a baked program here: the test fetches it
// from a lease, so it is the same file.
func TestSidecarBaked(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cat := filepath.Join(dir, "cat")
	plain := acquire(t, p, sandbox.Spec{})
	rc, err := plain.CopyOut(ctx, "/usr/bin/cat")
	require.NoError(t, err)
	tr := tar.NewReader(rc)
	_, err = tr.Next()
	require.NoError(t, err)
	b, err := io.ReadAll(tr)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.NoError(t, os.WriteFile(cat, b, 0o755))
	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\ncat\n"), 0o755))

	for _, c := range []struct {
		name, binary, baked string
		copied              bool
	}{
		{"same file", cat, "/usr/bin/cat", false},
		{"another file", other, "/usr/bin/cat", true},
		{"no file", cat, "/opt/outpost/none/cat", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := acquireWithSidecar(t, p, sandbox.Spec{}, kubernetes.Sidecar{Binary: c.binary, Baked: c.baked})
			conn, ok := kubernetes.SidecarStreams(sb)
			require.True(t, ok)
			_, err := conn.Stdin.Write([]byte("ping " + c.name + "\n"))
			require.NoError(t, err)
			line, err := bufio.NewReader(conn.Stdout).ReadString('\n')
			require.NoError(t, err, conn.Stderr())
			assert.Equal(t, "ping "+c.name+"\n", line, "the program's output, unmarked")

			// The lease sees the command lines of the pod's processes.
			r := run(ctx, t, sb, sh(`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f"; echo; done`))
			require.NoError(t, r.err)
			if c.copied {
				assert.Contains(t, r.stdout, "/outpost-sidecar/program", "the program was copied in")
			} else {
				assert.NotContains(t, r.stdout, "/outpost-sidecar/program", "nothing was copied")
				assert.Contains(t, r.stdout, "/usr/bin/cat", "the image's copy runs")
			}
		})
	}
}

// TestSidecarStartsBesideTheLease: the lease is returned while its
// sidecar program is still being started, and the program's streams wait
// for that start. The program here is a FIFO whose content is written only
// once the lease is returned: a lease that waited for the sidecar would
// never come.
func TestSidecarStartsBesideTheLease(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fifo := filepath.Join(t.TempDir(), "program")
	require.NoError(t, syscall.Mkfifo(fifo, 0o755))
	returned := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			wrote <- err
			return
		}
		select {
		case <-returned:
			_, err = f.Write([]byte("#!/bin/sh\ncat\n"))
		case <-ctx.Done():
			err = ctx.Err()
		}
		wrote <- errors.Join(err, f.Close())
	}()
	sb := acquireWith(t, func(ctx context.Context) (sandbox.Sandbox, error) {
		return p.AcquireWithSidecarUnchecked(ctx, sandbox.Spec{}, kubernetes.Sidecar{Binary: fifo})
	})
	close(returned)
	conn, ok := kubernetes.SidecarStreams(sb)
	require.True(t, ok)
	r := run(ctx, t, sb, sh(`echo lease-runs`))
	require.NoError(t, r.err)
	assert.Equal(t, "lease-runs\n", r.stdout)

	require.NoError(t, <-wrote)
	require.NoError(t, conn.Started(ctx), conn.Stderr())
	_, err := conn.Stdin.Write([]byte("ping\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(conn.Stdout).ReadString('\n')
	require.NoError(t, err, conn.Stderr())
	assert.Equal(t, "ping\n", line)
}

// TestSidecarEndedIsGone: a pod whose sidecar program ended is gone for
// its turns ([sandbox.GoneReason]), with the program's last words, so that
// a pool hands out another lease instead of one whose model gateway died.
func TestSidecarEndedIsGone(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	bin := filepath.Join(t.TempDir(), "sidecar")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho MARK-sidecar-down >&2\nexit 3\n"), 0o755))
	sb := acquireWithSidecar(t, p, sandbox.Spec{}, kubernetes.Sidecar{Binary: bin})
	conn, ok := kubernetes.SidecarStreams(sb)
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, conn.Started(ctx), conn.Stderr())
	// The program's output ends when it does.
	_, err := io.Copy(io.Discard, conn.Stdout)
	require.NoError(t, err)
	why := sandbox.GoneReason(ctx, sb)
	assert.Contains(t, why, "sidecar program ended")
	assert.Contains(t, why, "MARK-sidecar-down")
	assert.Contains(t, why, sb.ID())

	require.NoError(t, sb.Release(ctx))
	assert.Empty(t, sandbox.GoneReason(ctx, sb), "a released lease is not gone")
}
