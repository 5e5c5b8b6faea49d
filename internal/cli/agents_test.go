package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/agents/agenttest"
	"github.com/outpost-dev/outpost/bootstrap"
)

// TestTestOnlyAgentHelpAndPins: an agent declared by one adapter folder and
// one registry row (package agenttest's parrot) appears in the help texts
// that list agents and in bootstrap's defaults and --print, with no edit to
// this package.
func TestTestOnlyAgentHelpAndPins(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		f := &Factory{IO: IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
			Getenv: func(string) string { return "" }, Now: time.Now,
			Agents: agenttest.Registry, Sandboxes: outpost.SandboxKinds()}
		code := Execute(context.Background(), f, args)
		return code, out.String(), errOut.String()
	}
	code, out, _ := run("run", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "antigravity, claude, codex, copilot, parrot, or a driver", "--agent lists the row")
	code, out, _ = run("bootstrap", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "every npm-distributed one: claude, codex, copilot, parrot)")
	code, out, _ = run("image", "build", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "--with claude,codex,copilot,parrot")

	code, out, errOut := run("bootstrap", "--print", agenttest.Name)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "parrot|@parrot-test/parrot@3.1.4|@parrot-test/parrot-"+string(bootstrap.HostPlatform())+"/parrot|parrot 3.1.4\n", out)
	code, out, errOut = run("bootstrap", "--print")
	require.Equal(t, 0, code, errOut)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 4, "the defaults, parrot among them: %s", out)
	assert.Contains(t, out, "codex|@openai/codex@0.169.0|.bin/codex|codex-cli 0.169.0\n")

	code, _, errOut = run("bootstrap", "--print", "antigravity")
	assert.Equal(t, int(ExitConfiguration), code)
	assert.Contains(t, errOut, "antigravity: the pin has no npm package")
}
