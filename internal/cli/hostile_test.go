package cli

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestPlantedConfigOwnedByAnotherUser: a .env or a driver another user
// owns (an agent lease running as another uid, another account on the
// machine) is refused with a configuration error.
func TestPlantedConfigOwnedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	project := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(project, ".outpost", "drivers"), 0o755))
	env := filepath.Join(project, ".outpost", ".env")
	require.NoError(t, os.WriteFile(env, []byte("ANTHROPIC_BASE_URL=http://127.0.0.1:9/MARK-planted\n"), 0o600))
	require.NoError(t, os.Chown(env, 4242, 4242))
	drv := filepath.Join(project, ".outpost", "drivers", "planted.json")
	require.NoError(t, os.WriteFile(drv, []byte(`{"id":"planted","binary":"sh","output":{"mode":"text"}}`), 0o644))
	require.NoError(t, os.Chown(drv, 4242, 4242))
	t.Chdir(project)
	ws := t.TempDir()

	r := execute(t, "emit {\"type\":\"finished\",\"ok\":true}", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "-")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "owned by uid 4242")
	assert.NotContains(t, r.stdout+r.stderr, "MARK-planted")

	require.NoError(t, os.Chown(env, 0, 0))
	r = execute(t, "x", nil, "run", "--agent", "planted", "--auth", "none", "--sandbox", "host", "--no-store", "--workspace", ws, "x")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "owned by uid 4242")
}

// export is a conversation export as `conversations export` writes it,
// with the parts a test wants to break.
type export struct {
	m       conversation.Manifest
	tar     []byte
	sha     string // "" = the tar's own
	rawHead []byte // replaces the manifest line
}

func (e export) bytes(t *testing.T) []byte {
	t.Helper()
	m := e.m
	sum := sha256.Sum256(e.tar)
	m.SHA256 = hex.EncodeToString(sum[:])
	if e.sha != "" {
		m.SHA256 = e.sha
	}
	head := e.rawHead
	if head == nil {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		head = b
	}
	return append(append(append([]byte(exportMagic), head...), '\n'), e.tar...)
}

func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := []byte(strings.Repeat("x", int(h.Size)))
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// headerOnly is a tar stream cut after h's header: a claimed size alone.
func headerOnly(t *testing.T, h *tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(h))
	return buf.Bytes()
}

func reg(name string, size int64) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size}
}

// listTree returns every path under dir.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestImportRefusesHostileArchives: every export that carries more than a
// conversation, lies about itself or exceeds the limits is refused with a
// session error (exit 9) — or a configuration error (exit 2) for an
// existing id — and nothing is written anywhere.
func TestImportRefusesHostileArchives(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "store")
	m := conversation.Manifest{ID: "c1", Agent: "fake-store", Cwd: "/workspace"}
	session := reg(".fake/sessions/c1.jsonl", 4)
	manyFiles := []*tar.Header{}
	for i := range conversation.MaxEntries + 1 {
		manyFiles = append(manyFiles, reg(".fake/sessions/c1/f"+strconv.Itoa(i), 0))
	}
	hugeManifest, _ := json.Marshal(map[string]any{"id": "c1", "agent": "fake-store", "pad": strings.Repeat("p", conversation.MaxManifestBytes)})
	cases := map[string]struct {
		e    export
		code int
		msg  string
	}{
		"hook":          {export{m: m, tar: tarOf(t, session, reg(fakecli.HookFile, 3))}, int(ExitSession), "not a conversation file"},
		"claude hook":   {export{m: m, tar: tarOf(t, session, reg(".claude/settings.json", 3))}, int(ExitSession), "not a conversation file"},
		"rc file":       {export{m: m, tar: tarOf(t, session, reg(".bashrc", 3))}, int(ExitSession), "not a conversation file"},
		"symlink":       {export{m: m, tar: tarOf(t, session, &tar.Header{Name: ".fake/sessions/c1/l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})}, int(ExitSession), "not a regular file"},
		"hard link":     {export{m: m, tar: tarOf(t, session, &tar.Header{Name: ".fake/sessions/c1/h", Typeflag: tar.TypeLink, Linkname: ".bashrc"})}, int(ExitSession), "not a regular file"},
		"traversal":     {export{m: m, tar: tarOf(t, session, reg(".fake/sessions/c1/../../../../.bashrc", 3))}, int(ExitSession), "escapes"},
		"absolute":      {export{m: m, tar: tarOf(t, reg("/etc/cron.d/x", 3))}, int(ExitSession), "escapes"},
		"wrong sha":     {export{m: m, tar: tarOf(t, session), sha: strings.Repeat("ab", 32)}, int(ExitSession), "sha256 mismatch"},
		"no sha":        {export{m: m, tar: tarOf(t, session), rawHead: []byte(`{"id":"c1","agent":"fake-store"}`)}, int(ExitSession), "no sha256"},
		"huge manifest": {export{m: m, tar: tarOf(t, session), rawHead: hugeManifest}, int(ExitSession), "not an Outpost conversation export"},
		"bad id":        {export{m: m, tar: tarOf(t, session), rawHead: []byte(`{"id":"../../etc","agent":"fake-store","sha256":"` + strings.Repeat("0", 64) + `"}`)}, int(ExitSession), "invalid id"},
		"unknown agent": {export{m: conversation.Manifest{ID: "c1", Agent: "nosuch"}, tar: tarOf(t, session)}, int(ExitSession), "unknown agent"},
		"no storage":    {export{m: conversation.Manifest{ID: "c1", Agent: "fake"}, tar: tarOf(t, session)}, int(ExitSession), "keeps no conversations"},
		"entries":       {export{m: m, tar: tarOf(t, manyFiles...)}, int(ExitSession), "more than"},
		"entry size":    {export{m: m, tar: headerOnly(t, reg(".fake/sessions/c1/big", conversation.MaxEntryBytes+1))}, int(ExitSession), "larger than"},
	}
	for name, tc := range cases {
		file := filepath.Join(base, "export")
		b := tc.e.bytes(t)
		require.NoError(t, os.WriteFile(file, b, 0o600))
		r := execute(t, "", nil, "conversations", "import", file, "--store", store)
		assert.Equal(t, tc.code, r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stderr, tc.msg, name)
		assert.Empty(t, listTree(t, filepath.Join(store)), "%s: nothing stored", name)
	}
	assert.Equal(t, []string{filepath.Join(base, "export"), store}, listTree(t, base), "nothing written outside the store")

	// A genuine export imports; importing it again needs --replace.
	file := filepath.Join(base, "good")
	require.NoError(t, os.WriteFile(file, export{m: m, tar: tarOf(t, session)}.bytes(t), 0o600))
	r := execute(t, "", nil, "conversations", "import", file, "--store", store)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "c1\n", r.stdout)
	r = execute(t, "", nil, "conversations", "import", file, "--store", store)
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "already holds conversation c1")
	r = execute(t, "", nil, "conversations", "import", file, "--store", store, "--replace")
	assert.Equal(t, 0, r.code, r.stderr)

	// Export, then import into a keyed store: sealed there; the export
	// itself verifies.
	out := filepath.Join(base, "again")
	r = execute(t, "", nil, "conversations", "export", "c1", "--store", store, "-o", out)
	require.Equal(t, 0, r.code, r.stderr)
	keyed := map[string]string{keyEnv: strings.Repeat("ab", 32)}
	r = execute(t, "", keyed, "conversations", "import", out, "--store", filepath.Join(base, "sealed"))
	require.Equal(t, 0, r.code, r.stderr)
	r = execute(t, "", keyed, "conversations", "show", "c1", "--store", filepath.Join(base, "sealed"))
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"encrypted": true`)
}

// plantArchive writes conversation id into store as an attacker with write
// access to the store would: any files, a matching digest.
func plantArchive(t *testing.T, store string, m conversation.Manifest, archive []byte) {
	t.Helper()
	sum := sha256.Sum256(archive)
	m.SHA256, m.Size = hex.EncodeToString(sum[:]), int64(len(archive))
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(store, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(store, m.ID+".json"), b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(store, m.ID+".tar.zst"), archive, 0o600))
}

// TestResumeRefusesPlantedArchives: resuming a conversation whose stored
// archive carries a hook, is a zstd bomb, or was downgraded from sealed to
// plain fails with exit 9 before the CLI starts; the hook's marker never
// appears.
func TestResumeRefusesPlantedArchives(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "HOOK-RAN")
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	hookTar, err := conversation.WriteFiles([]conversation.File{{Path: ".fake/sessions/c1.jsonl", Content: []byte("{}")},
		{Path: fakecli.HookFile, Content: []byte("touch " + marker + "\n")}})
	require.NoError(t, err)
	var bomb bytes.Buffer
	zw, _ := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(4<<20))
	tw := tar.NewWriter(zw)
	zero := make([]byte, 1<<20)
	for i := range 3 {
		require.NoError(t, tw.WriteHeader(reg(".fake/sessions/c1/z"+strconv.Itoa(i), 127<<20)))
		for range 127 {
			_, _ = tw.Write(zero)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	plain := enc.EncodeAll(tarOf(t, reg(".fake/sessions/c1.jsonl", 2)), nil)

	script := "hooks\nemit {\"type\":\"text\",\"text\":\"CLI-RAN\"}\nemit {\"type\":\"finished\",\"ok\":true}"
	cases := []struct {
		name    string
		archive []byte
		m       conversation.Manifest
		env     map[string]string
		msg     string
	}{
		{"hook", enc.EncodeAll(hookTar, nil), conversation.Manifest{ID: "c1", Agent: "fake-store", Format: conversation.Format}, nil, "not a conversation file"},
		{"bomb", bomb.Bytes(), conversation.Manifest{ID: "c1", Agent: "fake-store", Format: conversation.Format}, nil, "larger than"},
		{"downgrade", plain, conversation.Manifest{ID: "c1", Agent: "fake-store", Format: conversation.Format},
			map[string]string{keyEnv: strings.Repeat("cd", 32)}, "not encrypted"},
		{"forged seal", append([]byte("OPSEAL01"), bytes.Repeat([]byte{1}, 200)...), conversation.Manifest{ID: "c1", Agent: "fake-store", Format: conversation.Format, Encrypted: true},
			map[string]string{keyEnv: strings.Repeat("cd", 32)}, "cannot open"},
	}
	for _, tc := range cases {
		plantArchive(t, store, tc.m, tc.archive)
		r := execute(t, script, tc.env, "resume", "c1", "-", "--sandbox", "host", "--auth", "none", "--workspace", ws, "--store", store)
		assert.Equal(t, int(ExitSession), r.code, "%s: %s", tc.name, r.stdout+r.stderr)
		assert.Contains(t, r.stdout+r.stderr, tc.msg, tc.name)
		assert.NotContains(t, r.stdout, "CLI-RAN", "%s: the CLI never ran", tc.name)
		assert.NoFileExists(t, marker, tc.name)
	}
	assert.Empty(t, listTree(t, ws), "nothing written to the workspace")
}

var maxRSSRe = regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`)

// timedRun is outpost (this test binary, on PATH) under /usr/bin/time -v.
type timedRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func timeCommand(t *testing.T, args ...string) *timedRun {
	t.Helper()
	outpost, err := exec.LookPath("outpost")
	require.NoError(t, err, "the test binary is on PATH as outpost")
	return timeBinary(t, outpost, args...)
}

// timeBinary is timeCommand with the outpost binary at path.
func timeBinary(t *testing.T, outpost string, args ...string) *timedRun {
	t.Helper()
	testenv.Short(t)
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		testenv.Missing(t, testenv.RequireToolsEnv, "GNU time (Debian package time)")
	}
	r := &timedRun{cmd: exec.Command("/usr/bin/time", append([]string{"-v", outpost}, args...)...)}
	r.cmd.Env = append(os.Environ(), stateEnv+"="+t.TempDir())
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	return r
}

// result returns outpost's exit status and peak RSS in MiB as time saw them.
func (r *timedRun) result(t *testing.T) (int, float64) {
	t.Helper()
	m := maxRSSRe.FindStringSubmatch(r.stderr.String())
	require.NotNil(t, m, r.stderr.String())
	kb, _ := strconv.ParseFloat(m[1], 64)
	st := regexp.MustCompile(`Exit status: (\d+)`).FindStringSubmatch(r.stderr.String())
	require.NotNil(t, st, r.stderr.String())
	code, _ := strconv.Atoi(st[1])
	return code, kb / 1024
}

// TestReplayDevZeroBoundedAndInterruptible: replaying an endless line keeps
// outpost's memory bounded, and SIGINT ends it with exit 130.
func TestReplayDevZeroBoundedAndInterruptible(t *testing.T) {
	// The command as users build it: the race detector's own memory would
	// swamp the figure.
	bin := filepath.Join(t.TempDir(), "outpost")
	bout, err := exec.Command("go", "build", "-o", bin, "../../cmd/outpost").CombinedOutput()
	require.NoError(t, err, string(bout))
	r := timeBinary(t, bin, "replay", "--agent", "claude", "--stdout", "/dev/zero")
	require.NoError(t, r.cmd.Start())
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	time.Sleep(3 * time.Second)
	// Signal outpost itself (the child of time), as a terminal would.
	out, err := exec.Command("pgrep", "-P", strconv.Itoa(r.cmd.Process.Pid)).Output()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGINT))
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("replay did not stop on SIGINT")
	}
	code, rss := r.result(t)
	t.Logf("replay /dev/zero for 3 s: peak RSS %.1f MiB", rss)
	assert.LessOrEqual(t, rss, 128.0)
	assert.Equal(t, int(ExitAborted), code)
	assert.Contains(t, r.stdout.String(), `"class":"aborted"`)
}

// TestCaptureGigabyteBounded: an agent that writes 1 GiB of session files
// (nine 114 MiB files and more) does not drive outpost's memory past 128
// MiB; the conversation is not stored, and the terminal says so.
func TestCaptureGigabyteBounded(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	r := timeCommand(t, "run", "--agent", "fake-store", "--sandbox", "host", "--auth", "none",
		"--workspace", t.TempDir(), "--store", store, "-")
	var script strings.Builder
	script.WriteString("emit {\"type\":\"conversation\",\"id\":\"c1\"}\nwrite .fake/sessions/c1.jsonl 1000\n")
	for i := range 9 {
		script.WriteString("write .fake/sessions/c1/part" + strconv.Itoa(i) + " 119537664\n")
	}
	script.WriteString("emit {\"type\":\"finished\",\"ok\":true}\n")
	r.cmd.Stdin = strings.NewReader(script.String())
	require.NoError(t, r.cmd.Run())
	code, rss := r.result(t)
	t.Logf("capture of 1 GiB: peak RSS %.1f MiB", rss)
	assert.Equal(t, 0, code, r.stdout.String())
	assert.LessOrEqual(t, rss, 128.0)
	assert.Contains(t, r.stdout.String(), "! warning: conversation c1 not stored")
	assert.Contains(t, r.stdout.String(), "larger than")
	entries, _ := os.ReadDir(store)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "c1", "nothing stored")
	}
}

// TestBatchJobsFileBounded: a jobs file is read as a stream with a bound on
// each line: /dev/zero fails at the bound, in bounded memory, with an error
// naming the file, the line and the bound.
func TestBatchJobsFileBounded(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "outpost")
	bout, err := exec.Command("go", "build", "-o", bin, "../../cmd/outpost").CombinedOutput()
	require.NoError(t, err, string(bout))
	// Under a 2 GiB address-space limit: a build that reads the whole
	// input fails here instead of taking the machine's memory.
	r := timeBinary(t, "sh", "-c", `ulimit -v 2097152 && exec "$0" "$@"`, bin,
		"batch", "/dev/zero", "--results", filepath.Join(t.TempDir(), "results.jsonl"), "--offline")
	_ = r.cmd.Run()
	code, rss := r.result(t)
	t.Logf("batch /dev/zero: peak RSS %.1f MiB", rss)
	stderr := r.stderr.String()
	assert.Equal(t, int(ExitConfiguration), code, stderr[max(0, len(stderr)-2000):])
	assert.True(t, strings.Contains(stderr, "/dev/zero line 1: longer than the 16 MiB bound on a job line"),
		stderr[max(0, len(stderr)-2000):])
	assert.LessOrEqual(t, rss, 64.0, "the bound, not the input")
}

// TestBatchInputLinesChecked: text after a job's JSON object is refused
// with its line; a results file with a line over its bound is refused by
// --resume with its line, before any job runs.
func TestBatchInputLinesChecked(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte(`{"id":"a","agent":"claude","prompt":"p"}`+"\n"+
		`{"id":"b","agent":"claude","prompt":"p"} {"id":"c"}`+"\n"), 0o600))
	r := execute(t, "", nil, "batch", jobs, "--results", filepath.Join(dir, "r.jsonl"), "--offline")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
	assert.Contains(t, r.stderr, "jobs.jsonl line 2: text after the job's JSON object")

	require.NoError(t, os.WriteFile(jobs, []byte(`{"id":"a","agent":"claude","prompt":"p"}`+"\n"), 0o600))
	results := filepath.Join(dir, "results.jsonl")
	fh, err := os.Create(results)
	require.NoError(t, err)
	_, err = fh.WriteString(`{"job":"a","outcome":{"ok":false,"class":"process"}}` + "\n")
	require.NoError(t, err)
	_, err = fh.Write(bytes.Repeat([]byte("x"), maxResultLine+1))
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	r = execute(t, "", nil, "batch", jobs, "--results", results, "--offline", "--resume")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
	assert.Contains(t, r.stderr, "results.jsonl line 2: longer than the 64 MiB bound on a result line")
}

// TestExportFailureLeavesNoFile: `conversations export -o F` that fails — a
// conversation the store lacks, or one whose stored manifest cannot be
// used (an unknown format, a wrong size, encryption without a key, itself
// as its parent) — exits with its class and leaves no F, empty or partial,
// and no temporary file; an existing F is never replaced; the store stays
// usable (list and the other conversations' exports work).
func TestExportFailureLeavesNoFile(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	archive := enc.EncodeAll(tarOf(t, reg(".fake/sessions/c1.jsonl", 2)), nil)
	good := conversation.Manifest{ID: "good", Agent: "fake-store", Format: conversation.Format}
	plantArchive(t, store, good, archive)
	out := t.TempDir()
	noFile := func(name string) {
		t.Helper()
		entries, err := os.ReadDir(out)
		require.NoError(t, err)
		assert.Empty(t, entries, "%s: nothing left in the output directory", name)
	}

	r := execute(t, "", nil, "conversations", "export", "missing", "--store", store, "-o", filepath.Join(out, "F"))
	assert.Equal(t, int(ExitSession), r.code, r.stderr)
	noFile("missing")

	for name, tc := range map[string]struct {
		edit func(*conversation.Manifest)
		msg  string
	}{
		"format 99":   {func(m *conversation.Manifest) { m.Format = 99 }, "archive format 99"},
		"wrong size":  {func(m *conversation.Manifest) { m.Size++ }, "but its manifest says"},
		"encrypted":   {func(m *conversation.Manifest) { m.Encrypted = true }, "marked encrypted"},
		"self-parent": {func(m *conversation.Manifest) { m.Parent = m.ID }, "names itself as its parent"},
	} {
		m := conversation.Manifest{ID: "c1", Agent: "fake-store", Format: conversation.Format}
		plantArchive(t, store, m, archive)
		// plantArchive sets the digest and size; the edit comes after.
		b, err := os.ReadFile(filepath.Join(store, "c1.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &m))
		tc.edit(&m)
		b, err = json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(store, "c1.json"), b, 0o600))

		r := execute(t, "", nil, "conversations", "export", "c1", "--store", store, "-o", filepath.Join(out, "F"))
		assert.Equal(t, int(ExitSession), r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stderr, tc.msg, name)
		noFile(name)
		r = execute(t, "", nil, "conversations", "list", "--store", store)
		assert.Equal(t, 0, r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stdout, "c1", "%s: still listed", name)
		kept, err := os.ReadFile(filepath.Join(store, "c1.tar.zst"))
		require.NoError(t, err)
		assert.Equal(t, archive, kept, "%s: the archive is kept", name)
	}

	// The store still serves the others; an existing file is kept.
	f := filepath.Join(out, "F")
	r = execute(t, "", nil, "conversations", "export", "good", "--store", store, "-o", f)
	require.Equal(t, 0, r.code, r.stderr)
	first, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(first, []byte(exportMagic)))
	r = execute(t, "", nil, "conversations", "export", "good", "--store", store, "-o", f)
	assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
	assert.Contains(t, r.stderr, "exists")
	again, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}
