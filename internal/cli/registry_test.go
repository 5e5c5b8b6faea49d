package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/fakecli"
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
		f.Agents, f.Sandboxes = reg, map[string]outpost.SandboxKind{"host": outpost.SandboxKinds()["host"]}
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
