package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

func TestCheckEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    tar.Header
		ok   bool
	}{
		{"file", tar.Header{Name: "a/b.txt", Typeflag: tar.TypeReg}, true},
		{"dot slash", tar.Header{Name: "./a/b.txt", Typeflag: tar.TypeReg}, true},
		{"dir", tar.Header{Name: "a/", Typeflag: tar.TypeDir}, true},
		{"inner link", tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../b"}, true},
		{"sibling link", tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "b/c"}, true},
		{"hard link", tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a/b.txt"}, true},
		{"absolute", tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}, false},
		{"empty", tar.Header{Name: "", Typeflag: tar.TypeReg}, false},
		{"dotdot", tar.Header{Name: "../x", Typeflag: tar.TypeReg}, false},
		{"inner dotdot", tar.Header{Name: "a/../../x", Typeflag: tar.TypeReg}, false},
		{"harmless dotdot is still refused", tar.Header{Name: "a/../x", Typeflag: tar.TypeReg}, false},
		{"escaping link", tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"}, false},
		{"absolute link", tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/workspace"}, false},
		{"escaping hard link", tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../x"}, false},
		{"device", tar.Header{Name: "d", Typeflag: tar.TypeChar}, false},
		{"fifo", tar.Header{Name: "f", Typeflag: tar.TypeFifo}, false},
	} {
		err := leasekit.CheckEntry(&tc.h)
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, leasekit.ErrUnsafeArchive, tc.name)
		}
	}
}

func TestSafeTarDropsOwnersAndStopsAtUnsafe(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "ok", Typeflag: tar.TypeReg, Mode: 0o640, Size: 2, Uid: 0, Gid: 0, Uname: "root"}))
	_, _ = tw.Write([]byte("hi"))
	require.NoError(t, tw.Close())
	var out bytes.Buffer
	require.NoError(t, leasekit.SafeTar(&out, &in))
	h, err := tar.NewReader(&out).Next()
	require.NoError(t, err)
	assert.Equal(t, "ok", h.Name)
	assert.Equal(t, int64(0o640), h.Mode)
	assert.Empty(t, h.Uname)

	in.Reset()
	tw = tar.NewWriter(&in)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg}))
	require.NoError(t, tw.Close())
	err = leasekit.SafeTar(io.Discard, &in)
	assert.ErrorIs(t, err, leasekit.ErrUnsafeArchive)
	assert.True(t, outposterr.Is(err, outposterr.Configuration))

	err = leasekit.SafeTar(io.Discard, bytes.NewReader([]byte("not a tar archive at all, just text that is long enough to be a header block maybe")))
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
}

func FuzzSafeTar(f *testing.F) {
	var seed bytes.Buffer
	tw := tar.NewWriter(&seed)
	_ = tw.WriteHeader(&tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../b"})
	_ = tw.Close()
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		if err := leasekit.SafeTar(&out, bytes.NewReader(b)); err != nil {
			return
		}
		// Whatever passed must pass again and contain only safe entries.
		tr := tar.NewReader(&out)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			require.NoError(t, leasekit.CheckEntry(h))
		}
	})
}

func TestLabelKey(t *testing.T) {
	assert.Equal(t, LabelSession, labelKey("session"))
	assert.Equal(t, LabelRun, labelKey("run"))
	assert.Equal(t, "example.com/x", labelKey("example.com/x"))
}

func TestParseUserAndNetwork(t *testing.T) {
	uid, gid, err := parseUser("1000:1001")
	require.NoError(t, err)
	assert.Equal(t, []int{1000, 1001}, []int{uid, gid})
	for _, bad := range []string{"", "root", "1000", "a:b", "1000:", ":1", "-1:0"} {
		_, _, err := parseUser(bad)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%q", bad)
	}
	for _, ok := range []string{"none", "bridge", "host", "outpost-net"} {
		assert.NoError(t, checkNetwork(ok))
	}
	for _, bad := range []string{"container:abc", "a b"} {
		assert.Error(t, checkNetwork(bad))
	}
}

// fakeReapClient is an in-memory engine for reaper decisions.
type fakeReapClient struct {
	containers []container.Summary
	volumes    []*volume.Volume
	networks   []network.Summary
	removed    []string
	failRemove error
}

func (f *fakeReapClient) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return f.containers, nil
}

func (f *fakeReapClient) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	if f.failRemove != nil {
		return f.failRemove
	}
	f.removed = append(f.removed, "container/"+id)
	return nil
}

func (f *fakeReapClient) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{Volumes: f.volumes}, nil
}

func (f *fakeReapClient) VolumeRemove(_ context.Context, id string, _ bool) error {
	f.removed = append(f.removed, "volume/"+id)
	return nil
}

func (f *fakeReapClient) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return f.networks, nil
}

func (f *fakeReapClient) NetworkRemove(_ context.Context, id string) error {
	f.removed = append(f.removed, "network/"+id)
	return nil
}

func TestReapDecisions(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	owner := func(pid, host, start string) map[string]string {
		return map[string]string{LabelManaged: "true", LabelOwnerPID: pid, LabelOwnerHost: host, LabelOwnerStart: start}
	}
	f := &fakeReapClient{
		containers: []container.Summary{
			{ID: "live", Labels: owner("10", "here", "100"), Created: now.Unix()},
			{ID: "dead", Labels: owner("11", "here", ""), Created: now.Unix()},
			{ID: "reused-pid", Labels: owner("10", "here", "99"), Created: now.Unix()},
			{ID: "foreign-young", Labels: owner("10", "there", ""), Created: now.Add(-time.Hour).Unix()},
			{ID: "foreign-old", Labels: owner("10", "there", ""), Created: now.Add(-48 * time.Hour).Unix()},
			{ID: "unlabelled-old", Labels: map[string]string{LabelManaged: "true"}, Created: now.Add(-48 * time.Hour).Unix()},
		},
		volumes:  []*volume.Volume{{Name: "vol-dead", Labels: owner("11", "here", "")}},
		networks: []network.Summary{{ID: "net-live", Name: "n", Labels: owner("10", "here", "")}},
	}
	alive := func(pid int, start string) bool { return pid == 10 && (start == "" || start == "100") }
	opts := ReapOptions{Hostname: "here", Now: func() time.Time { return now }, Alive: alive}

	dry := opts
	dry.DryRun = true
	got, err := Reap(context.Background(), f, dry)
	require.NoError(t, err)
	var ids []string
	for _, l := range got {
		ids = append(ids, l.Kind+"/"+l.ID)
		assert.False(t, l.Removed)
		assert.NotEmpty(t, l.Reason)
	}
	assert.Equal(t, []string{"container/dead", "container/reused-pid", "container/foreign-old", "container/unlabelled-old", "volume/vol-dead"}, ids)
	assert.Empty(t, f.removed)

	got, err = Reap(context.Background(), f, opts)
	require.NoError(t, err)
	assert.Len(t, got, 5)
	assert.Equal(t, ids, f.removed)

	// Removal failures are joined and classified; not-found is success.
	f.removed = nil
	f.failRemove = errors.New("boom")
	_, err = Reap(context.Background(), f, opts)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)

	// A container the engine is already removing (its auto-removal after
	// the runner died) counts as removed; another conflict does not.
	f.failRemove = fmt.Errorf("removal of container dead is already in progress: %w", cerrdefs.ErrConflict)
	got, err = Reap(context.Background(), f, opts)
	require.NoError(t, err)
	assert.True(t, got[0].Removed)
	f.failRemove = fmt.Errorf("container is paused: %w", cerrdefs.ErrConflict)
	_, err = Reap(context.Background(), f, opts)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)

	// A negative grace never reaps what cannot be checked.
	f.failRemove = nil
	neg := opts
	neg.Grace = -1
	neg.DryRun = true
	got, err = Reap(context.Background(), f, neg)
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func TestUsableBy(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	uid, gid := os.Getuid(), os.Getgid()
	assert.True(t, usableBy(fi, uid, gid), "owner")
	assert.True(t, usableBy(fi, 0, 0), "root")
	assert.False(t, usableBy(fi, uid+4242, gid+4242), "stranger, 0700")
	require.NoError(t, os.Chmod(dir, 0o777))
	fi, err = os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, usableBy(fi, uid+4242, gid+4242), "stranger, 0777")
}

func TestSignalNames(t *testing.T) {
	assert.Equal(t, "SIGKILL", leasekit.LinuxSignalName(9))
	assert.Equal(t, "SIGTERM", leasekit.LinuxSignalName(15))
	assert.Empty(t, leasekit.LinuxSignalName(0))
	assert.Empty(t, leasekit.LinuxSignalName(64))
	assert.Equal(t, "SIGTERM", leasekit.HostSignalName(syscall.SIGTERM))
}

func TestEngineKindAndLocality(t *testing.T) {
	h := http.Header{}
	assert.Equal(t, flavorDocker, flavorOf(h))
	h.Set("Libpod-Api-Version", "4.3.1")
	assert.Equal(t, flavorPodman, flavorOf(h))
	assert.Equal(t, flavorPodman, flavorOf(http.Header{"Server": []string{"Libpod/4.3.1 (linux)"}}))

	for host, local := range map[string]bool{
		"":                               true,
		"unix:///var/run/docker.sock":    true,
		"unix:///run/podman/podman.sock": true,
		"tcp://127.0.0.1:2376":           true,
		"tcp://localhost:2376":           true,
		"tcp://[::1]:2376":               true,
		"tcp://10.0.0.5:2376":            false,
		"tcp://build-box:2376":           false,
		"ssh://me@127.0.0.1":             false,
		"ssh://me@build-box:22":          false,
		"http://docker.example.com":      false,
		"garbage":                        false,
	} {
		assert.Equal(t, local, Endpoint{Host: host}.Local(), host)
	}
	assert.False(t, Endpoint{Host: "tcp://127.0.0.1:2376", Remote: true}.Local())
}

func TestPodmanHints(t *testing.T) {
	p := &Provider{flavor: flavorPodman}
	err := p.engineError(errors.New("runc create failed: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted"), "start container")
	assert.True(t, outposterr.Is(err, outposterr.Sandbox))
	assert.Contains(t, err.Error(), "default_ulimits")
	err = p.engineError(errors.New("container-init binary not found on the host: stat /usr/libexec/podman/catatonit"), "create container")
	assert.Contains(t, err.Error(), "install it")
	assert.Contains(t, p.imageHint("outpost/base:dev"), "podman load")
	d := &Provider{}
	assert.NotContains(t, d.engineError(errors.New("error setting rlimit"), "start").Error(), "default_ulimits")
	assert.Contains(t, d.imageHint("x"), "docker-setup")
}

// TestLifeStreamLine: the forwarders' and the keeper's reports are read
// from the engine's multiplexed stream: stderr frames skipped, a line split
// over frames joined, nothing read past the line's frame, what follows the
// line in its frame kept for the next line, and an early end is an error.
func TestLifeStreamLine(t *testing.T) {
	readStdoutLine := func(r io.Reader) (string, error) { return newLifeStream(r).line() }
	frame := func(stream byte, s string) []byte {
		h := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
		return append(h, s...)
	}
	var b bytes.Buffer
	b.Write(frame(2, "noise\n"))
	b.Write(frame(1, "outpost-forwards-"))
	b.Write(frame(1, "ready\n"))
	b.Write(frame(1, "later"))
	line, err := readStdoutLine(&b)
	require.NoError(t, err)
	assert.Equal(t, forwardReady, line)
	assert.Equal(t, frame(1, "later"), b.Bytes(), "read past the line")

	// Two lines in one frame, as the forwarders' report and the keeper's
	// often come: the second is the next line.
	b.Reset()
	b.Write(frame(1, forwardReady+"\n"+keeperRuns+"\nout"))
	b.Write(frame(2, "err"))
	b.Write(frame(1, "put"))
	s := newLifeStream(&b)
	line, err = s.line()
	require.NoError(t, err)
	assert.Equal(t, forwardReady, line)
	line, err = s.line()
	require.NoError(t, err)
	assert.Equal(t, keeperRuns, line)
	var out, errw bytes.Buffer
	require.NoError(t, s.copyTo(&out, &errw))
	assert.Equal(t, "output", out.String())
	assert.Equal(t, "err", errw.String())

	_, err = readStdoutLine(bytes.NewReader(frame(1, "no newline")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ended before")

	// A header's length is not trusted: a stdout frame that claims 2 GiB
	// is read as it streams, nothing allocated for its length (a line in
	// it is a line; the stream cut short in it is an error), other
	// streams' frames stream past, and a report that never ends is refused,
	// within one frame or over many.
	huge := []byte{1, 0, 0, 0, 0x80, 0, 0, 0}
	s = newLifeStream(bytes.NewReader(append(huge, "ready\n"...)))
	line, err = s.line()
	require.NoError(t, err)
	assert.Equal(t, "ready", line)
	require.ErrorIs(t, s.copyTo(io.Discard, io.Discard), io.ErrUnexpectedEOF)
	_, err = readStdoutLine(bytes.NewReader(append(huge, strings.Repeat("z", 5000)...)))
	require.ErrorContains(t, err, "too long")
	b.Reset()
	b.Write(frame(2, strings.Repeat("x", 1<<20)))
	b.Write(frame(1, "outpost-forwards-ready\n"))
	line, err = readStdoutLine(&b)
	require.NoError(t, err)
	assert.Equal(t, forwardReady, line)
	b.Reset()
	for range 5 {
		b.Write(frame(1, strings.Repeat("y", 1000)))
	}
	_, err = readStdoutLine(&b)
	require.ErrorContains(t, err, "too long")
}

// TestLifeStreamFrames: two report lines and the output after them, cut
// into stdout frames at random with stderr and stdin-numbered frames
// between, read back as the lines, then the stdout after them and all
// the stderr sent after the second line, in order; a stream cut inside a
// header or a frame is an error, one that ends between frames is not.
func TestLifeStreamFrames(t *testing.T) {
	frame := func(stream byte, s string) []byte {
		h := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
		return append(h, s...)
	}
	rng := rand.New(rand.NewPCG(7, 25))
	for i := range 300 {
		stdout := "first report\nsecond\n" + strings.Repeat(fmt.Sprintf("out %d\n", i), rng.IntN(50))
		reported := len("first report\nsecond\n")
		var b bytes.Buffer
		var wantErr strings.Builder
		for at := 0; at < len(stdout); {
			n := min(1+rng.IntN(40), len(stdout)-at)
			if rng.IntN(3) == 0 {
				noise := fmt.Sprintf("e%d.%d;", i, at)
				b.Write(frame(2, noise))
				if at >= reported {
					wantErr.WriteString(noise)
				}
			}
			if rng.IntN(5) == 0 {
				b.Write(frame(0, "stdin?"))
			}
			b.Write(frame(1, ""))
			b.Write(frame(1, stdout[at:at+n]))
			at += n
		}
		b.Write(frame(2, "last"))
		wantErr.WriteString("last")
		whole := b.Bytes()

		s := newLifeStream(bytes.NewReader(whole))
		for _, want := range []string{"first report", "second"} {
			line, err := s.line()
			require.NoError(t, err, "stream %d", i)
			require.Equal(t, want, line, "stream %d", i)
		}
		var out, errw bytes.Buffer
		require.NoError(t, s.copyTo(&out, &errw), "stream %d", i)
		require.Equal(t, stdout[reported:], out.String(), "stream %d", i)
		require.Equal(t, wantErr.String(), errw.String(), "stream %d", i)

		cut := len(whole) - 1 - rng.IntN(7) // inside the last frame or its header
		s = newLifeStream(bytes.NewReader(whole[:cut]))
		_, _ = s.line()
		_, _ = s.line()
		require.ErrorIs(t, s.copyTo(io.Discard, io.Discard), io.ErrUnexpectedEOF, "stream %d cut at %d", i, cut)
	}
}
