package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/sandboxtest/testkind"
)

// TestOneRowRegistersAnAgentEverywhere: an agent added as one registry
// row is run, replayed, listed by doctor with its fixtures, and a row
// without fixtures fails doctor.
func TestOneRowRegistersAnAgentEverywhere(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	reg := func() *agents.Registry {
		r := agents.New()
		require.NoError(t, r.Register(agents.Agent{Name: "fake", New: func() adapters.Adapter { return fakecli.New(exe) },
			Fixtures: fakecli.Fixtures}))
		require.NoError(t, r.Register(agents.Agent{Name: "bare", New: func() adapters.Adapter { return fakecli.New(exe) }}))
		return r
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		f := testFactory(strings.NewReader(""), &out, &errOut, func(k string) string {
			return map[string]string{"PATH": os.Getenv("PATH"), "OUTPOST_CACHE_DIR": t.TempDir()}[k]
		}, time.Now)
		f.Agents, f.Sandboxes = reg, sandbox.Kinds{"host": outpost.SandboxKinds()["host"]}
		code := Execute(context.Background(), f, args)
		return code, out.String(), errOut.String()
	}

	code, out, _ := run("doctor")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, out, "pass  fake protocol fixtures")
	assert.Contains(t, out, "1 recorded runs replay to their outcomes")
	assert.Contains(t, out, "FAIL  bare protocol fixtures")
	assert.Regexp(t, `pass  model gateway +API keys and tokens stay outside`, out, "the gateway starts and doctor says where credentials go")

	code, out, errOut := run("run", "--agent", "fake", "--sandbox", "host", "--auth", "none", "--no-store", "--json",
		`emit {"type":"result","text":"one row"}
emit {"type":"finished","ok":true}`)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"text":"one row"`)

	code, _, errOut = run("run", "--agent", "claude", "--sandbox", "host", "--auth", "none", "hi")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, errOut, `unknown agent "claude" (known: bare, fake, or a driver in .outpost/drivers)`)

	code, _, errOut = run("run", "--agent", "fake", "--sandbox", "docker", "--auth", "none", "hi")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, errOut, `--sandbox must be one of host, not "docker"`, "the sandbox table decides, not an if-chain")
}

// TestOneRowRegistersASandboxKind: a sandbox kind added as one registry
// row (package testkind) is listed by run's help with its own flag, runs
// turns with that flag's value, is checked by doctor and named in its
// gateway line, and is swept by gc with its gc flag and described in gc's
// help — with no line of this package naming it, and none naming a kind
// the registry does not hold.
func TestOneRowRegistersASandboxKind(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		f := testFactory(strings.NewReader(""), &out, &errOut, func(k string) string {
			return map[string]string{"PATH": os.Getenv("PATH"), "OUTPOST_CACHE_DIR": t.TempDir()}[k]
		}, time.Now)
		f.Agents = func() *agents.Registry {
			r := agents.New()
			require.NoError(t, r.Register(agents.Agent{Name: "fake", New: func() adapters.Adapter { return fakecli.New(exe) },
				Fixtures: fakecli.Fixtures}))
			return r
		}
		k := testkind.Kind()
		k.TaskImages = fakeTaskImages{}
		f.Sandboxes = sandbox.Kinds{"host": outpost.SandboxKinds()["host"], k.Name: k}
		code := Execute(context.Background(), f, args)
		return code, out.String(), errOut.String()
	}

	code, out, _ := run("run", "-h")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "sandbox: host, testkind\n", "no default claimed: docker is not in the registry")
	assert.Regexp(t, `--testkind-label string +with --sandbox testkind: a label the test kind reports`, out)

	code, _, errOut := run("run", "--agent", "fake", "--auth", "none", "hi")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, errOut, "--sandbox is required: the default, docker, is not one of the kinds here (host, testkind)")

	code, out, errOut = run("run", "--agent", "fake", "--sandbox", "testkind", "--testkind-label", "L-1",
		"--auth", "none", "--no-store", "--json", "env TESTKIND_LABEL\nemit {\"type\":\"finished\",\"ok\":true}")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"text":"TESTKIND_LABEL=L-1"`, "the kind's flag reached its engine")

	_, out, _ = run("doctor", "--image", "img:1")
	assert.Contains(t, out, "pass  testkind engine")
	assert.Contains(t, out, "image img:1")
	assert.Contains(t, out, "API keys and tokens stay outside host and testkind leases with --credentials gateway;")
	assert.NotContains(t, out, "docker")
	assert.NotContains(t, out, "kubernetes")

	code, out, _ = run("gc", "-h")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "sweep this sandbox kind: host, testkind (default: host)")
	assert.Contains(t, out, "--testkind-label")
	assert.Contains(t, out, "\n  - testkind (with --sandbox testkind): nothing: one leftover named after\n    --testkind-label is reported,\n")
	assert.Contains(t, out, "\n  - host: lease directories (outpost-host-*")
	assert.NotContains(t, out, "Docker")
	assert.NotContains(t, out, "kubernetes")

	code, out, errOut = run("gc", "--sandbox", "testkind", "--testkind-label", "L-2", "--dry-run")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "left over testkind lease L-2 (dry run true)\n", out, "only the named kind is swept")

	// Task images are the kind's row's: its own engine's, or none.
	code, out, errOut = run("gc", "--sandbox", "testkind", "--testkind-label", "L-3", "--dry-run", "--images")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "left over testkind lease L-3 (dry run true)\nleft over image outpost-task:fake (dry run true)\n", out)
	code, _, errOut = run("gc", "--sandbox", "host", "--images")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, errOut, "--images: the host sandbox has no task images")
}

// fakeTaskImages is a kind's task images that builds and removes nothing.
type fakeTaskImages struct{}

func (fakeTaskImages) Ensure(_ context.Context, _ func(string) string, dir, file, _ string, _ io.Writer) (string, bool, error) {
	return "outpost-task:" + filepath.Base(dir) + "-" + file, true, nil
}

func (fakeTaskImages) Remove(_ context.Context, _ func(string) string, dryRun bool) ([]sandbox.Leftover, error) {
	return []sandbox.Leftover{{What: fmt.Sprintf("image outpost-task:fake (dry run %t)", dryRun)}}, nil
}

// TestTaskImageOfTheKind: a job's environment is built by the chosen
// kind's row; a kind that runs no image refuses it, naming those that do.
func TestTaskImageOfTheKind(t *testing.T) {
	f := testFactory(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" }, time.Now)
	k := testkind.Kind()
	k.TaskImages = fakeTaskImages{}
	f.Sandboxes = sandbox.Kinds{"host": outpost.SandboxKinds()["host"], k.Name: k}
	tag, built, err := f.ensureTaskImage(context.Background(), "testkind", "/jobs/env", "Dockerfile", io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "outpost-task:env-Dockerfile", tag)
	assert.True(t, built)
	_, _, err = f.ensureTaskImage(context.Background(), "host", "/jobs/env", "Dockerfile", io.Discard)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "the host sandbox runs no image, so it cannot run a task's environment: run in a sandbox that does (testkind)")
}

// TestBuiltinKindsDescribeThemselves: gc's help and doctor's gateway line
// say what each built-in kind sweeps and where its credentials stay from
// the kinds' own rows.
func TestBuiltinKindsDescribeThemselves(t *testing.T) {
	var out, errOut bytes.Buffer
	f := testFactory(strings.NewReader(""), &out, &errOut, func(string) string { return "" }, time.Now)
	f.Sandboxes = outpost.SandboxKinds()
	require.Equal(t, 0, Execute(context.Background(), f, []string{"gc", "-h"}), errOut.String())
	assert.Contains(t, out.String(), "\n  - docker: containers, volumes and networks labelled dev.outpost.managed on the Docker\n")
	assert.Contains(t, out.String(), "\n  - host: lease directories (outpost-host-* in the temporary directory,")
	assert.Contains(t, out.String(), "\n  - kubernetes (with --sandbox kubernetes): pods and Secrets in every namespace the\n")
	assert.NotContains(t, out.String(), "\n  - podman", "podman has no reaper")

	kinds := outpost.SandboxKinds().Sorted()
	assert.Equal(t, "API keys and tokens stay outside docker, host and podman leases and kubernetes pods (a gateway sidecar) "+
		"with --credentials gateway; login files (--auth account) go inside", gatewayDoctor(nil, kinds, true).detail)
	assert.Equal(t, "API keys and tokens stay outside docker, host and podman leases and kubernetes pods on this machine's network "+
		"(other pods get theirs inside) with --credentials gateway; login files (--auth account) go inside", gatewayDoctor(nil, kinds, false).detail)
	none := sandbox.Kind{Name: "inside", GatewayHelp: func(bool) string { return "" }}
	assert.Equal(t, "no sandbox kind keeps API keys and tokens out of its leases: they go inside",
		gatewayDoctor(nil, []sandbox.Kind{none}, true).detail)
}
