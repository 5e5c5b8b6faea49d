package agents_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/golden"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/agents/agenttest"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/usage"
)

// TestEveryBuiltinAgentIsComplete fails when an adapter is registered
// without golden fixtures that replay, or without its catalog row.
func TestEveryBuiltinAgentIsComplete(t *testing.T) {
	r := agents.Builtin()
	require.Equal(t, []string{"antigravity", "claude", "codex", "copilot"}, r.Names())
	for _, a := range r.All() {
		t.Run(a.Name, func(t *testing.T) {
			require.NotNil(t, a.Fixtures, "no golden fixtures")
			n, err := golden.CheckAll(context.Background(), a.New(), a.Fixtures, "testdata")
			require.NoError(t, err)
			assert.Positive(t, n)
			require.NotNil(t, a.CLI, "no catalog row")
			assert.Equal(t, a.New().Binary(), a.CLI.Command(), "the catalog row installs the adapter's binary")
			assert.Equal(t, a.Name != "antigravity", a.Offline(), "offline means an endpoint override")
			assert.Equal(t, a.Name != "antigravity", a.Default)
		})
	}
}

func TestRegistry(t *testing.T) {
	r := agents.New()
	require.NoError(t, r.Register(agents.Agent{Name: "one", New: func() adapters.Adapter { return nil }}))
	err := r.Register(agents.Agent{Name: "one", New: func() adapters.Adapter { return nil }})
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Error(t, r.Register(agents.Agent{Name: "two"}), "a row needs a constructor")
	_, err = r.Adapter("nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown agent "nope" (known: one, or a driver in .outpost/drivers)`)
}

func TestDriversRegisterIntoTheSameTable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".outpost", "drivers")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("greeter.json", `{"id":"greeter","binary":"sh","args":["-c","cat"],"stdin":"${input.prompt}","output":{"mode":"text"}}`)
	write("claude.json", `{"id":"claude","binary":"sh","output":{"mode":"text"}}`)
	write("broken.json", `{"id":`)

	r := agents.Builtin()
	res, err := r.LoadDrivers(root)
	require.NoError(t, err)
	byName := map[string]agents.DriverResult{}
	for _, d := range res {
		byName[filepath.Base(d.Path)] = d
	}
	require.Len(t, byName, 3)
	assert.NoError(t, byName["greeter.json"].Err)
	assert.ErrorContains(t, byName["claude.json"].Err, "built-in agent", "a driver never shadows a built-in")
	assert.Error(t, byName["broken.json"].Err)

	a, ok := r.Lookup("greeter")
	require.True(t, ok)
	require.NotNil(t, a.Driver)
	assert.Equal(t, "greeter", a.New().Name())
	c, _ := r.Lookup("claude")
	assert.Nil(t, c.Driver, "the built-in row is kept")
}

// TestModelsArePriced fails when a model a pinned CLI runs by default, a
// model its recorded fixtures show it running, or a model the scripted
// server announces has no complete list price: a cost cap on such a model
// could not be enforced.
func TestModelsArePriced(t *testing.T) {
	want := map[string]string{}
	for _, m := range outposttest.Models() {
		want[m] = "announced by the scripted server"
	}
	for _, a := range agents.Builtin().All() {
		if d, ok := a.New().(adapters.DefaultModeler); ok {
			want[d.DefaultModel()] = a.Name + "'s default model"
		}
		require.NoError(t, fs.WalkDir(a.Fixtures, "testdata", func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || path.Base(p) != "expected.json" {
				return err
			}
			b, err := fs.ReadFile(a.Fixtures, p)
			if err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			for _, m := range modelsIn(v) {
				if m != "<synthetic>" {
					want[m] = a.Name + " ran it in " + p
				}
			}
			return nil
		}))
	}
	require.Contains(t, want, "claude-opus-5-5", "Claude Code's recorded default")
	for m, why := range want {
		p, ok := usage.Lookup(m)
		if !assert.True(t, ok, "%s (%s) has no price", m, why) {
			continue
		}
		all := usage.Usage{Input: 1, Cached: 1, CacheCreated: 2, Output: 1}
		if strings.HasPrefix(p.Model, "claude-") {
			all.CacheCreated1h = 1 // Claude Code writes 1-hour cache entries too
		}
		_, ok = usage.Estimate(m, all)
		assert.True(t, ok, "%s (%s) lacks a price for a token class", m, why)
	}
}

// modelsIn returns the values of every "model" key in a decoded JSON value.
func modelsIn(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "model" && s != "" {
				out = append(out, s)
				continue
			}
			out = append(out, modelsIn(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, modelsIn(e)...)
		}
	}
	return out
}

// TestAgentSpecificsDeriveFromTheRegistry: the gateway's upstreams, the
// reserved relocation variables and the bootstrap catalog are what the
// built-in adapters and rows declare, and a further row (the test-only
// parrot of package agenttest) adds its own without an edit elsewhere.
func TestAgentSpecificsDeriveFromTheRegistry(t *testing.T) {
	b := agents.Builtin()
	assert.Equal(t, []string{"https://api.anthropic.com", "https://api.openai.com"}, b.Upstreams(nil))
	assert.Equal(t, []string{"https://api.anthropic.com", "https://proxy.example", "https://api.openai.com", "https://byok.example"},
		b.Upstreams(map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.example", "COPILOT_PROVIDER_BASE_URL": "https://byok.example/v1/"}))
	assert.Equal(t, []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"}, b.RelocationVars())
	cat, err := b.Catalog()
	require.NoError(t, err)
	assert.Equal(t, bootstrap.DefaultCatalog().Rows(), cat.Rows(), "the built-in rows' CLIs are the default catalog")

	p := agenttest.Registry()
	assert.Contains(t, p.Upstreams(nil), agenttest.Upstream)
	assert.Contains(t, p.Upstreams(map[string]string{agenttest.BaseURLVar: "https://other.example"}), "https://other.example")
	assert.Equal(t, []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", agenttest.HomeVar}, p.RelocationVars())
	cat, err = p.Catalog()
	require.NoError(t, err)
	row, ok := cat.Row(agenttest.Name)
	require.True(t, ok, "the row's CLI is in the catalog")
	assert.Equal(t, *agenttest.CLI(), row)
}

// TestEveryAdapterValidatesOnce: every built-in adapter refuses what
// adapters.Input.Validate refuses, with the same message and its own name
// on the error, because its Request calls ValidateFor instead of checking
// again.
func TestEveryAdapterValidatesOnce(t *testing.T) {
	bad := map[string]adapters.Input{
		"empty prompt":                {Prompt: "  "},
		"invalid conversation id":     {Prompt: "hi", Continue: "../x"},
		"invalid model name":          {Prompt: "hi", Model: "a b"},
		"fork needs the conversation": {Prompt: "hi", Fork: true},
		"negative max turns":          {Prompt: "hi", MaxTurns: -1},
	}
	for _, a := range agents.Builtin().All() {
		for want, in := range bad {
			t.Run(a.Name+"/"+want, func(t *testing.T) {
				require.ErrorContains(t, in.Validate(), want)
				_, err := a.New().Request(in)
				require.Error(t, err)
				assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
				assert.Equal(t, a.Name+": "+in.Validate().Error(), err.Error())
			})
		}
	}
}
