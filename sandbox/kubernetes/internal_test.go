package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

func TestMarkerFilter(t *testing.T) {
	const nonce = "0123abcd"
	start := "\x1eoutpost:" + nonce + ":start\x1e"
	marker := "\x1eoutpost:" + nonce + ":exit:137:1:1\x1e"
	stream := "before\n" + start + "err line\n" + marker + "after\n"
	// Every split of the stream into two writes gives the same result.
	for i := 0; i <= len(stream); i++ {
		var out bytes.Buffer
		var got []exitMarker
		starts := 0
		f := newMarkerFilter(&out, nonce, func() { starts++ }, func(m exitMarker) { got = append(got, m) })
		for _, part := range []string{stream[:i], stream[i:]} {
			n, err := f.Write([]byte(part))
			require.NoError(t, err)
			require.Equal(t, len(part), n)
		}
		f.Flush()
		assert.Equal(t, "before\nerr line\nafter\n", out.String(), "split at %d", i)
		assert.Equal(t, []exitMarker{{code: 137, oomKills: 1, changed: true}}, got, "split at %d", i)
		assert.Equal(t, 1, starts, "split at %d", i)
	}
	// Byte by byte.
	var out bytes.Buffer
	var got []exitMarker
	f := newMarkerFilter(&out, nonce, func() {}, func(m exitMarker) { got = append(got, m) })
	for i := range len(stream) {
		_, err := f.Write([]byte{stream[i]})
		require.NoError(t, err)
	}
	f.Flush()
	assert.Equal(t, "before\nerr line\nafter\n", out.String())
	assert.Len(t, got, 1)

	// After the exit marker, a copy of it is output like anything else.
	out.Reset()
	f = newMarkerFilter(&out, nonce, func() {}, func(exitMarker) {})
	_, err := f.Write([]byte(marker + marker))
	require.NoError(t, err)
	assert.Equal(t, marker, out.String())
}

func TestMarkerFilterLeavesOtherDataAlone(t *testing.T) {
	for _, s := range []string{
		"plain output\n",
		"\x1eoutpost:othernonce:exit:0:0:0\x1e", // another exec's marker (a forged one)
		"\x1eoutpost:0123abcd:exit:notanumber:0:0\x1e",
		"\x1eoutpost:0123abcd:exit:999:0:0\x1e",
		"\x1eoutpost:0123abcd:exit:0:0\x1e",
		"\x1eoutpost:0123abcd:exit:0:0:2\x1e",
		"\x1eoutpost:0123abcd:bogus\x1e",
		"\x1e\x1e\x1eoutpost:0123",
		strings.Repeat("\x1eoutpost:0123abcd:", 3),
	} {
		var out bytes.Buffer
		called := false
		f := newMarkerFilter(&out, "0123abcd", func() { called = true }, func(exitMarker) { called = true })
		_, err := f.Write([]byte(s))
		require.NoError(t, err)
		f.Flush()
		assert.Equal(t, s, out.String(), "%q", s)
		assert.False(t, called, "%q", s)
	}
}

// TestHeaderRoundTrip feeds the wrapper's header reader (the first lines of
// wrapperScript) with hostile values through the real sh, and checks that
// the values arrive verbatim and that none of them runs as code.
func TestHeaderRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	values := map[string]string{
		"A": "plain",
		"B": "it's \"quoted\" $HOME `touch " + pwned + "` $(touch " + pwned + ")",
		"C": "multi\nline\n\nwith trailing newline\n",
		"D": "'; touch " + pwned + "; '",
		"E": "",
		"F": "back\\slash\\n and \ttab and \r carriage",
		"G": strings.Repeat("long ", 2000),
	}
	// The reading part of the wrapper, then print each variable NUL-terminated.
	reader := wrapperScript[:strings.Index(wrapperScript, "oomc()")]
	script := reader + `for v in A B C D E F G; do eval "printf '%s\0' \"\$$v\""; done; cat`
	cmd := exec.Command(sh, "-c", script, "test", "/tmp/base", "/", "0")
	cmd.Stdin = io.MultiReader(bytes.NewReader(header("nonce", values)), strings.NewReader("the rest of stdin"))
	out, err := cmd.Output()
	require.NoError(t, err)
	parts := strings.Split(string(out), "\x00")
	require.Len(t, parts, 8)
	for i, k := range []string{"A", "B", "C", "D", "E", "F", "G"} {
		assert.Equal(t, values[k], parts[i], k)
	}
	assert.Equal(t, "the rest of stdin", parts[7], "the command's own input follows the header")
	_, err = os.Stat(pwned)
	assert.ErrorIs(t, err, os.ErrNotExist, "a value ran as code")
}

func TestParseUserAndNetwork(t *testing.T) {
	uid, gid, err := parseUser("1000:1001")
	require.NoError(t, err)
	assert.Equal(t, int64(1000), uid)
	assert.Equal(t, int64(1001), gid)
	for _, bad := range []string{"0:0", "0:1000", "1000:0", "root", "1000", "-1:2", ""} {
		_, _, err := parseUser(bad)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%q: %v", bad, err)
	}
	for n, want := range map[string]bool{"": false, "pod": false, "bridge": false, "host": true} {
		got, err := hostNetwork(n)
		require.NoError(t, err, n)
		assert.Equal(t, want, got, n)
	}
	for _, bad := range []string{"none", "container:x", "mynet"} {
		_, err := hostNetwork(bad)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), bad)
	}
}

func TestLabels(t *testing.T) {
	assert.Equal(t, "outpost.dev/session", labelKey("session"))
	assert.Equal(t, "outpost.dev/session", labelKey("dev.outpost.session"))
	assert.Equal(t, "example.com/x", labelKey("example.com/x"))
	assert.Equal(t, "my-host.example", labelValue("my-host.example"))
	assert.Equal(t, "a-b-c", labelValue("a b/c"))
	assert.Len(t, labelValue(strings.Repeat("x", 100)), 63)

	labels, ann := map[string]string{}, map[string]string{}
	setLabel(labels, ann, "outpost.dev/run", "ok-value")
	setLabel(labels, ann, "outpost.dev/session", "not a label value: spaces")
	assert.Equal(t, map[string]string{"outpost.dev/run": "ok-value"}, labels)
	assert.Equal(t, map[string]string{"outpost.dev/session": "not a label value: spaces"}, ann)
}

func TestPodClassification(t *testing.T) {
	now := metav1.Now()
	assert.Contains(t, goneReason("p", nil), "deleted")
	assert.Contains(t, goneReason("p", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}), "being deleted")
	assert.Contains(t, goneReason("p", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}}), "evicted: low on memory")
	assert.Contains(t, goneReason("p", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}), "lifetime")
	assert.Empty(t, goneReason("p", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}))

	waitingWith := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: containerName, Image: "img:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}}}
	}
	waiting := func(reason string) *corev1.Pod { return waitingWith(reason, "msg") }
	assert.Contains(t, startFailure(waiting("ErrImageNeverPull")), "img:1 is not on the node")
	assert.Contains(t, startFailure(waiting("ImagePullBackOff")), "cannot be pulled")
	assert.Contains(t, startFailure(waiting("CreateContainerConfigError")), "cannot start")
	assert.Empty(t, startFailure(waiting("ContainerCreating")))
	assert.Empty(t, startFailure(waiting("ErrImagePull")), "one failed pull may still be retried")
	assert.Empty(t, startFailure(waitingWith("CreateContainerConfigError", "failed to sync secret cache: timed out waiting for the condition")),
		"a busy kubelet that has not synced the lease's secret yet retries by itself")
	assert.Contains(t, startFailure(waitingWith("CreateContainerConfigError", `secret "outpost-x" not found`)), "cannot start")

	unsched := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu.",
	}}}}
	assert.Contains(t, podProblem(unsched), "unschedulable: 0/1 nodes are available")
}

func TestLeftoverDecisions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	opts := ReapOptions{ReapOptions: sandbox.ReapOptions{Hostname: "here", Now: func() time.Time { return now }, Grace: 15 * time.Minute,
		Alive: func(pid int, start string) bool { return pid == 42 && start == "7" }}}
	lo := func(pid, host, start string, hb time.Time) *Leftover {
		return &Leftover{Labels: map[string]string{LabelOwnerPID: pid, LabelOwnerHost: host, LabelOwnerStart: start},
			Heartbeat: hb, Created: now.Add(-time.Hour)}
	}
	assert.False(t, leftover(lo("42", "here", "7", time.Time{}), opts.policy()), "live owner")
	l := lo("42", "here", "8", time.Time{})
	assert.True(t, leftover(l, opts.policy()), "pid reused")
	assert.Contains(t, l.Reason, "42 is gone")
	assert.True(t, leftover(lo("43", "here", "", time.Time{}), opts.policy()), "dead owner")
	assert.False(t, leftover(lo("1", "elsewhere", "", now.Add(-time.Minute)), opts.policy()), "foreign, fresh heartbeat")
	assert.True(t, leftover(lo("1", "elsewhere", "", now.Add(-time.Hour)), opts.policy()), "foreign, stale heartbeat")
	opts.Grace = -1
	assert.False(t, leftover(lo("1", "elsewhere", "", now.Add(-time.Hour)), opts.policy()), "negative grace: never")
}

// syncArchive builds a sync archive: the manifest, then entries.
func syncArchive(t *testing.T, manifest []string, entries ...tar.Header) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	m := []byte(strings.Join(manifest, "\x00"))
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: manifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(m))}))
	_, err := tw.Write(m)
	require.NoError(t, err)
	for _, h := range entries {
		body := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Uname)) // Uname carries the body in these tests
			body = h.Uname
			h.Uname = ""
		}
		require.NoError(t, tw.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return &buf
}

func testLease(t *testing.T, ws string) *lease {
	p := &Provider{log: slog.New(slog.DiscardHandler), opts: Options{MaxSyncBytes: 1 << 20}}
	l := newLease(p, "0123456789abcdef0123", DefaultUser, ws)
	t.Cleanup(l.cancel)
	return l
}

func TestApplySync(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "host-only.txt"), []byte("mine"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "preexisting-escape")))
	l := testLease(t, ws)
	l.known = map[string]bool{"gone.txt": true, "kept.txt": true}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("old"), 0o644))

	mt := time.Unix(1_700_000_000, 0)
	err := l.applySync(syncArchive(t,
		[]string{"./kept.txt", "./new", "./new/file.sh", "./link", "./ro"},
		tar.Header{Name: "./kept.txt", Typeflag: tar.TypeReg, Mode: 0o600, Uname: "new content", ModTime: mt},
		tar.Header{Name: "./new/", Typeflag: tar.TypeDir, Mode: 0o750, ModTime: mt},
		tar.Header{Name: "./new/file.sh", Typeflag: tar.TypeReg, Mode: 0o755, Uname: "#!/bin/sh\n", ModTime: mt},
		tar.Header{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: "new/file.sh"},
		tar.Header{Name: "./ro/", Typeflag: tar.TypeDir, Mode: 0o500, ModTime: mt},
		tar.Header{Name: "./ro/inside", Typeflag: tar.TypeReg, Mode: 0o644, Uname: "in a read-only dir", ModTime: mt},
		// Hostile entries: none may write outside ws.
		tar.Header{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Uname: "x"},
		tar.Header{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644, Uname: "x"},
		tar.Header{Name: "./abs-link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "./up-link", Typeflag: tar.TypeSymlink, Linkname: "../../.."},
		tar.Header{Name: "./dev", Typeflag: tar.TypeChar, Mode: 0o644},
	))
	require.NoError(t, err)

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(ws, name))
		require.NoError(t, err, name)
		return string(b)
	}
	assert.Equal(t, "new content", read("kept.txt"))
	assert.Equal(t, "#!/bin/sh\n", read("new/file.sh"))
	assert.Equal(t, "in a read-only dir", read("ro/inside"))
	assert.Equal(t, "mine", read("host-only.txt"), "a host file the pod never had is kept")
	fi, err := os.Stat(filepath.Join(ws, "kept.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.True(t, fi.ModTime().Equal(mt))
	fi, err = os.Stat(filepath.Join(ws, "ro"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o500), fi.Mode().Perm(), "directory modes are applied at the end")
	target, err := os.Readlink(filepath.Join(ws, "link"))
	require.NoError(t, err)
	assert.Equal(t, "new/file.sh", target)
	for _, name := range []string{"gone.txt", "abs-link", "up-link", "dev", "abs"} {
		_, err := os.Lstat(filepath.Join(ws, name))
		assert.ErrorIs(t, err, os.ErrNotExist, name)
	}
	_, err = os.Lstat(filepath.Join(filepath.Dir(ws), "escaped"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, map[string]bool{"kept.txt": true, "new": true, "new/file.sh": true, "link": true, "ro": true}, l.known)

	// Writing through a link that leaves the workspace is refused, and
	// nothing appears outside.
	err = l.applySync(syncArchive(t, []string{"./preexisting-escape/x"},
		tar.Header{Name: "./preexisting-escape/x", Typeflag: tar.TypeReg, Mode: 0o644, Uname: "x"}))
	assert.Error(t, err)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "a file was written through a link out of the workspace")

	// Chains of links whose names look inside: "p" -> "." puts "p/l" at
	// the top, where ".." leaves; "q/../.." goes up through the link q.
	err = l.applySync(syncArchive(t, []string{"./p", "./p/l"},
		tar.Header{Name: "./p", Typeflag: tar.TypeSymlink, Linkname: "."},
		tar.Header{Name: "./p/l", Typeflag: tar.TypeSymlink, Linkname: ".."}))
	assert.Error(t, err)
	require.NoError(t, l.applySync(syncArchive(t, []string{"./d", "./d/q", "./d/l"},
		tar.Header{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "./d/q", Typeflag: tar.TypeSymlink, Linkname: ".."},
		tar.Header{Name: "./d/l", Typeflag: tar.TypeSymlink, Linkname: "q/../.."})))
	_, err = os.Lstat(filepath.Join(ws, "d", "l"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a link going down and up is not recreated")
	real, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		if to, err := filepath.EvalSymlinks(p); err == nil && p != filepath.Join(ws, "preexisting-escape") {
			assert.True(t, to == real || strings.HasPrefix(to, real+string(filepath.Separator)), "link %s resolves to %s, outside the workspace", p, to)
		}
		return nil
	}))
}

func TestApplySyncLimits(t *testing.T) {
	l := testLease(t, t.TempDir())
	// No manifest first.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "x", Typeflag: tar.TypeReg, Size: 1}))
	_, _ = tw.Write([]byte("x"))
	require.NoError(t, tw.Close())
	assert.True(t, outposterr.Is(l.applySync(&buf), outposterr.Sandbox))

	// Over the byte limit.
	big := strings.Repeat("y", 2<<20)
	r := &limitReader{r: syncArchive(t, []string{"./big"}, tar.Header{Name: "./big", Typeflag: tar.TypeReg, Mode: 0o644, Uname: big}), n: 1 << 20}
	err := l.applySync(r)
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Sandbox))
}

func TestWriteWorkspaceTar(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("data"), 0o640))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "abs")))
	var buf bytes.Buffer
	known := map[string]bool{}
	require.NoError(t, writeWorkspaceTar(&buf, dir, known, nil))
	assert.Equal(t, map[string]bool{"a": true, "a/b": true, "a/b/f": true, "abs": true}, known)
	tr := tar.NewReader(&buf)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got[h.Name] = string(h.Typeflag) + h.Linkname
		assert.Zero(t, h.Uid)
	}
	assert.Equal(t, map[string]string{"a/": "5", "a/b/": "5", "a/b/f": "0", "abs": "2/etc/passwd"}, got)
}

func TestDefaultEnv(t *testing.T) {
	names := func(es []corev1.EnvVar) (n []string) {
		for _, e := range es {
			n = append(n, e.Name)
		}
		return n
	}
	assert.Equal(t, []string{"HOME", "TZ", "XDG_CACHE_HOME"}, names(defaultEnv(nil)))
	assert.Equal(t, []string{"HOME", "XDG_CACHE_HOME"}, names(defaultEnv(map[string]string{"TZ": "Europe/Paris", "X": "y"})),
		"a Spec.Env variable is not shadowed by a plain default")
}

// TestHiddenDirectories: a hidden directory (Spec.Hide: the project's
// .outpost) is never copied into the pod, and what the pod puts there is
// never written back.
func TestHiddenDirectories(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".outpost", "drivers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".outpost", ".env"), []byte("KEY=secret"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main"), 0o644))
	var buf bytes.Buffer
	known := map[string]bool{}
	require.NoError(t, writeWorkspaceTar(&buf, ws, known, []string{".outpost"}))
	assert.Equal(t, map[string]bool{"main.go": true}, known)
	assert.NotContains(t, buf.String(), "KEY=secret")

	l := testLease(t, ws)
	l.hide = []string{".outpost"}
	l.known = known
	require.NoError(t, l.applySync(syncArchive(t, []string{"./main.go", "./.outpost", "./.outpost/drivers/evil.json"},
		tar.Header{Name: "./.outpost/drivers/evil.json", Typeflag: tar.TypeReg, Mode: 0o644, Uname: `{"id":"evil"}`})))
	assert.NoFileExists(t, filepath.Join(ws, ".outpost", "drivers", "evil.json"), "nothing planted through the sync")
	assert.FileExists(t, filepath.Join(ws, ".outpost", ".env"), "and nothing removed there either")
}

// TestNodeIsLocal: a cluster is on this machine when its API server is on
// the loopback.
func TestNodeIsLocal(t *testing.T) {
	for host, want := range map[string]bool{
		"https://127.0.0.1:6443": true, "https://localhost:6443": true, "https://[::1]:6443": true,
		"https://10.0.0.1:6443": false, "https://k8s.example.internal": false, "": false, "::bad": false,
	} {
		p := &Provider{cfg: &rest.Config{Host: host}}
		assert.Equal(t, want, p.NodeIsLocal(), host)
	}
}

// TestRunnerDeadline: the runner Job's activeDeadlineSeconds, counted from
// just before it was created, always ends it at least a grace after now.
func TestRunnerDeadline(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	grace := 30 * time.Second
	assert.Equal(t, int64(31), runnerDeadline(start, start, grace), "at least one second elapsed, rounded up")
	assert.Equal(t, int64(41), runnerDeadline(start, start.Add(10200*time.Millisecond), grace))
	assert.Equal(t, int64(3630), runnerDeadline(start, start.Add(time.Hour), grace))
	assert.Equal(t, int64(2), runnerDeadline(start, start, 10*time.Millisecond), "a grace under a second is one")
	for _, d := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 90 * time.Minute} {
		got := time.Duration(runnerDeadline(start, start.Add(d), grace)) * time.Second
		assert.GreaterOrEqual(t, got, d+grace, "elapsed %v", d)
	}
}

// TestBakedScriptDecides: the sidecar's start script runs the image's copy
// of the program (mark first, then the program with its arguments and the
// exec's standard input) only when that file is the runner's: its stamp
// (the SHA-256 outpost image build --with-gateway writes next to it) says
// the runner's SHA-256 and its size is the runner's — the stamp is
// believed, the file not hashed — or, without a stamp, sha256sum says so.
// A stamp of another hash, a file of another size, another file without
// a stamp, or none: nothing printed, exit 97, and the program is copied
// instead. It runs here with the same sh, wc and sha256sum a pod has.
func TestBakedScriptDecides(t *testing.T) {
	script := []byte("#!/bin/sh\necho \"args:$*\"\ncat\n")
	sum := sha256.Sum256(script)
	hexSum := hex.EncodeToString(sum[:])
	other := sum
	other[0] ^= 1
	bake := func(content []byte, stamp string) string {
		dir := t.TempDir()
		prog := filepath.Join(dir, "program")
		require.NoError(t, os.WriteFile(prog, content, 0o755))
		if stamp != "" {
			require.NoError(t, os.WriteFile(prog+sandbox.BakedSumSuffix, []byte(stamp+"\n"), 0o644))
		}
		return prog
	}
	run := func(baked string) (string, int) {
		cmd := exec.Command("sh", "-c", bakedScript, "outpost-sidecar", baked, hexSum, strconv.Itoa(len(script)), "a b", "c")
		cmd.Stdin = strings.NewReader("from-stdin\n")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	// Same size as script, one byte off: only a stamp can vouch for it.
	sameSize := append([]byte(nil), script...)
	sameSize[bytes.Index(sameSize, []byte("args"))+3] = 'z'
	for name, baked := range map[string]string{
		"same file, no stamp":             bake(script, ""),
		"same file, stamped":              bake(script, hexSum),
		"stamp believed, file not hashed": bake(sameSize, hexSum),
	} {
		out, code := run(baked)
		assert.Equal(t, 0, code, name)
		require.NoError(t, readMark(strings.NewReader(out), bakedMark), name)
		want := "args"
		if name == "stamp believed, file not hashed" {
			want = "argz"
		}
		assert.Equal(t, bakedMark+"\n"+want+":a b c\nfrom-stdin\n", out, "%s: runs from the image", name)
	}

	dir := t.TempDir()
	for name, baked := range map[string]string{
		"same file, another stamp": bake(script, hex.EncodeToString(other[:])),
		"same file, empty stamp":   bake(script, "\n"),
		"stamped, another size":    bake(append(append([]byte(nil), script...), '\n'), hexSum),
		"another file, no stamp":   bake(sameSize, ""),
		"no file":                  filepath.Join(dir, "missing"),
		"a directory":              dir,
	} {
		out, code := run(baked)
		assert.Equal(t, 97, code, name)
		assert.Empty(t, out, "%s: nothing runs, the program is copied", name)
		assert.ErrorIs(t, readMark(strings.NewReader(out), bakedMark), errUnmarked)
	}
}

// TestReadMark: only a first line that is the mark counts, and nothing
// after it is consumed.
func TestReadMark(t *testing.T) {
	r := strings.NewReader("mark\n{\"ready\":1}\n")
	require.NoError(t, readMark(r, "mark"))
	rest, _ := io.ReadAll(r)
	assert.Equal(t, "{\"ready\":1}\n", string(rest))
	for _, s := range []string{"", "mar", "mark", "marks\n", "other\nmark\n", "xmark\n"} {
		assert.ErrorIs(t, readMark(strings.NewReader(s), "mark"), errUnmarked, "%q", s)
	}
}

// TestFileSumCached: a sidecar program is hashed once while it stays the
// same file, and again when it changes.
func TestFileSumCached(t *testing.T) {
	p := &Provider{}
	f := filepath.Join(t.TempDir(), "program")
	require.NoError(t, os.WriteFile(f, []byte("one"), 0o755))
	s1, err := p.fileSum(f, mustStat(t, f))
	require.NoError(t, err)
	assert.Equal(t, "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed", s1)
	assert.Len(t, p.sums, 1)
	require.NoError(t, os.WriteFile(f, []byte("two!"), 0o755))
	s2, err := p.fileSum(f, mustStat(t, f))
	require.NoError(t, err)
	assert.NotEqual(t, s1, s2)
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi
}

// TestCachedStoresOnlySuccess: a value is computed once and then read from
// the map; a failure is returned and not stored.
func TestCachedStoresOnlySuccess(t *testing.T) {
	var mu sync.Mutex
	var m map[string]int
	calls := 0
	fail := errors.New("boom")
	compute := func(v int, err error) func() (int, error) {
		return func() (int, error) { calls++; return v, err }
	}
	_, err := cached(&mu, &m, "a", compute(0, fail))
	require.ErrorIs(t, err, fail)
	assert.NotContains(t, m, "a", "a failure is not stored")
	v, err := cached(&mu, &m, "a", compute(7, nil))
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	v, err = cached(&mu, &m, "a", compute(8, nil))
	require.NoError(t, err)
	assert.Equal(t, 7, v, "the stored value, not a new one")
	assert.Equal(t, 2, calls)
}

// TestSidecarConnWaitsForStart: a sidecar's streams are handed out before
// its program runs; reads and writes wait for the start, an input closed
// before it is closed once the program runs, and a start that failed is
// the error of every read, write and Started, and what Stderr says.
func TestSidecarConnWaitsForStart(t *testing.T) {
	c := newSidecarConn()
	require.NoError(t, c.Stdin.Close(), "closing the input does not wait for the start")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, c.Started(cancelled), context.Canceled, "not started yet")
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(c.Stdout).ReadString('\n')
		got <- line
	}()
	inR, inW := io.Pipe()
	c.finish(&sidecarRun{stdin: inW, stdout: strings.NewReader("hello\n"), stderr: &leasekit.TailBuffer{Max: 64}}, nil)
	assert.Equal(t, "hello\n", <-got)
	require.NoError(t, c.Started(context.Background()))
	in, err := io.ReadAll(inR)
	require.NoError(t, err, "the input closed before the start is closed")
	assert.Empty(t, in)

	failed := newSidecarConn()
	why := errors.New("copy the sidecar program into pod p: MARK-no-room")
	failed.finish(nil, why)
	_, err = failed.Stdout.Read(make([]byte, 1))
	require.ErrorIs(t, err, why)
	_, err = failed.Stdin.Write([]byte("x"))
	require.ErrorIs(t, err, why)
	require.ErrorIs(t, failed.Started(context.Background()), why)
	assert.Contains(t, failed.Stderr(), "MARK-no-room")
	require.NoError(t, failed.Stdin.Close())
}

// TestSidecarConnFailure: a sidecar whose start failed, or whose program
// ended, says why (what [lease.Gone] reports, so that a pool drops the
// lease); one that starts or runs says nothing.
func TestSidecarConnFailure(t *testing.T) {
	c := newSidecarConn()
	assert.Empty(t, c.failure(), "still starting")
	_, inW := io.Pipe()
	run := &sidecarRun{stdin: inW, stdout: strings.NewReader(""), stderr: &leasekit.TailBuffer{Max: 64}, ended: make(chan struct{})}
	c.finish(run, nil)
	assert.Empty(t, c.failure(), "running")
	_, _ = run.stderr.Write([]byte("MARK-listen failed\n"))
	close(run.ended)
	assert.Equal(t, "its sidecar program ended: MARK-listen failed", c.failure())

	failed := newSidecarConn()
	failed.finish(nil, errors.New("copy the sidecar program into pod p: MARK-no-room"))
	assert.Equal(t, "its sidecar program did not start: copy the sidecar program into pod p: MARK-no-room", failed.failure())
}
