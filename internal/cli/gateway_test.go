package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
)

// gatewayMarker is the real API key of TestRunThroughGateway: the model
// server must receive it, the lease and the output never.
const gatewayMarker = "sk-ant-api03-MARK-gateway-cli-7c1d"

// TestRunThroughGateway: `outpost run --auth usage` with an API key keeps
// the key in Outpost's model gateway by default. The real Claude Code in a
// Docker lease (network none) reaches the model server only through the
// gateway, which swaps its placeholder for the real key; -v says so, and
// the key appears in no output. --credentials inside installs the key in
// the lease instead, and a typo is a flag error.
func TestRunThroughGateway(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	requireDocker(t)
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioTool))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777)) // a root host's leases run as uid 1000
	env := map[string]string{
		"PATH":               filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin",
		"ANTHROPIC_API_KEY":  gatewayMarker,
		"ANTHROPIC_BASE_URL": srv.URL(),
	}
	args := func(extra ...string) []string {
		return append([]string{"run", "--agent", "claude", "--auth", "usage", "--env", "ANTHROPIC_API_KEY",
			"--env", "ANTHROPIC_BASE_URL", "--no-store", "--workspace", ws, "--json", "-v"}, extra...)
	}

	r := execute(t, "", env, args("write MARK-gw1")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"ok":true`)
	got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-gw1.txt"))
	require.NoError(t, err, "the tool call ran in the lease")
	assert.Equal(t, "MARK-gw1", string(got))
	assert.Contains(t, r.stderr, "credential bridged through the gateway")
	reqs := srv.ModelRequests()
	require.NotEmpty(t, reqs)
	for _, q := range reqs {
		assert.Equal(t, outposttest.KeyFingerprint(gatewayMarker), q.KeyFingerprint, "%s %s carried the real key", q.Method, q.Path)
	}
	assert.NotContains(t, r.stdout+r.stderr, gatewayMarker, "the key reaches no output")
	assert.Contains(t, r.stdout, `"input":`, "usage is reported")

	// Inside: the lease holds the key (and needs the network to the server).
	n := len(reqs)
	r = execute(t, "", env, args("--credentials", "inside", "--network", "host", "write MARK-gw2")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.NotContains(t, r.stderr, "credential bridged through the gateway")
	assert.Contains(t, r.stderr, "credential installed inside the lease")
	reqs = srv.ModelRequests()
	require.Greater(t, len(reqs), n)
	for _, q := range reqs[n:] {
		assert.Equal(t, outposttest.KeyFingerprint(gatewayMarker), q.KeyFingerprint)
	}
	assert.NotContains(t, r.stdout+r.stderr, gatewayMarker)

	r = execute(t, "", env, args("--credentials", "outside", "hi")...)
	assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `--credentials must be gateway or inside, not "outside"`)
}
