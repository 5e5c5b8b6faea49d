package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

func load(t *testing.T, name string) *Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	s, err := Parse(data, name)
	require.NoError(t, err)
	return s
}

const textSpec = `{"id":"echo","binary":"sh","args":["-c","cat"],"stdin":"${input.prompt}","output":{"mode":"text"}}`

func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ spec, want string }{
		"secret in argv": {`{"id":"x","binary":"b","args":["--key=${secrets.K}"],"secrets":["K"],"output":{"mode":"text"}}`,
			"args[0]: secret K refused: secrets may appear only in env, never in argv"},
		"secret in a group": {`{"id":"x","binary":"b","args":[["--key","${secrets.K}"]],"secrets":["K"],"output":{"mode":"text"}}`,
			"argv is visible to every process on the host"},
		"secret in stdin": {`{"id":"x","binary":"b","stdin":"${secrets.K}","secrets":["K"],"output":{"mode":"text"}}`,
			"stdin: secret K refused"},
		"secret in binary": {`{"id":"x","binary":"${secrets.K}","secrets":["K"],"output":{"mode":"text"}}`,
			"binary: secret K refused"},
		"undeclared secret": {`{"id":"x","binary":"b","env":{"A":"${secrets.K}"},"output":{"mode":"text"}}`,
			"secret K is not declared"},
		"cwd escapes": {`{"id":"x","binary":"b","workdir":"../elsewhere","output":{"mode":"text"}}`,
			"workdir \"../elsewhere\" is outside the project root"},
		"cwd absolute": {`{"id":"x","binary":"b","workdir":"/etc","output":{"mode":"text"}}`,
			"outside the project root"},
		"unknown input":   {`{"id":"x","binary":"b","args":["${input.nope}"],"output":{"mode":"text"}}`, "unknown input \"nope\""},
		"bad namespace":   {`{"id":"x","binary":"b","args":["${env.HOME}"],"output":{"mode":"text"}}`, "must be ${input.NAME} or ${secrets.NAME}"},
		"unterminated":    {`{"id":"x","binary":"b","args":["${input.prompt"],"output":{"mode":"text"}}`, "unterminated"},
		"unknown field":   {`{"id":"x","binary":"b","argz":[],"output":{"mode":"text"}}`, "unknown field \"argz\""},
		"bad id":          {`{"id":"X Y","binary":"b","output":{"mode":"text"}}`, "id \"X Y\""},
		"no binary":       {`{"id":"x","output":{"mode":"text"}}`, "binary is required"},
		"no mode":         {`{"id":"x","binary":"b","output":{}}`, "output.mode is required"},
		"bad mode":        {`{"id":"x","binary":"b","output":{"mode":"xml"}}`, "must be text or jsonl"},
		"no rules":        {`{"id":"x","binary":"b","output":{"mode":"jsonl"}}`, "at least one rule"},
		"bad event":       {`{"id":"x","binary":"b","output":{"mode":"jsonl","rules":[{"match":{"t":"a"},"event":"nope"}]}}`, "unknown event \"nope\""},
		"bad field":       {`{"id":"x","binary":"b","output":{"mode":"jsonl","rules":[{"match":{"t":"a"},"event":"text","fields":{"txt":"a"}}]}}`, "has no field \"txt\""},
		"no match":        {`{"id":"x","binary":"b","output":{"mode":"jsonl","rules":[{"event":"text","fields":{"text":"a"}}]}}`, "match is required"},
		"bad exit code":   {`{"id":"x","binary":"b","output":{"mode":"text"},"failures":{"exit_codes":{"0":"quota"}}}`, "not an exit code"},
		"bad class":       {`{"id":"x","binary":"b","output":{"mode":"text"},"failures":{"exit_codes":{"3":"timeout"}}}`, "unknown class \"timeout\""},
		"bad regexp":      {`{"id":"x","binary":"b","output":{"mode":"text"},"failures":{"quota":["(unclosed"]}}`, "failures.quota[0]"},
		"text with rules": {`{"id":"x","binary":"b","output":{"mode":"text","rules":[{"match":{"t":"a"},"event":"text","fields":{"text":"a"}}]}}`, "text mode takes no rules"},
		"two values":      {`{"id":"x","binary":"b","output":{"mode":"text"}} {}`, "more than one JSON value"},
	} {
		_, err := Parse([]byte(tc.spec), "d.json")
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), tc.want, name)
			assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), name)
			assert.Contains(t, err.Error(), "driver d.json", "%s: the error names the file", name)
		}
	}
}

func TestLoadDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".outpost", "drivers")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	files, err := LoadDir(root)
	require.NoError(t, err)
	assert.Empty(t, files)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.json"), []byte(textSpec), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a driver"), 0o644))
	files, err = LoadDir(root)
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NoError(t, files[0].Err)
	assert.Equal(t, "echo", files[0].Spec.ID)

	// A symlinked workdir that leaves the project is refused at load; a
	// misnamed file too; neither hides the valid one.
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sneaky.json"),
		[]byte(`{"id":"sneaky","binary":"b","workdir":"escape","output":{"mode":"text"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "misnamed.json"), []byte(textSpec), 0o644))
	files, err = LoadDir(root)
	require.NoError(t, err)
	require.Len(t, files, 3)
	byName := map[string]File{}
	for _, f := range files {
		byName[filepath.Base(f.Path)] = f
	}
	assert.NoError(t, byName["echo.json"].Err, "the valid driver still loads")
	require.Error(t, byName["sneaky.json"].Err)
	assert.Contains(t, byName["sneaky.json"].Err.Error(), "sneaky.json: workdir \"escape\" resolves to")
	assert.Contains(t, byName["sneaky.json"].Err.Error(), "outside the project root")
	require.Error(t, byName["misnamed.json"].Err)
	assert.Contains(t, byName["misnamed.json"].Err.Error(), "misnamed.json: id \"echo\" must match the file name")

	// A workdir inside the project (also through a symlink inside it) is fine.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "alias")))
	s, err := Parse([]byte(`{"id":"ok","binary":"b","workdir":"alias","output":{"mode":"text"}}`), "ok.json")
	require.NoError(t, err)
	assert.NoError(t, s.CheckWorkdir(root))
}

func TestRequest(t *testing.T) {
	a := New(load(t, "jsonl.json"))
	assert.Equal(t, "jsonl", a.Name())
	assert.Equal(t, []string{"MYCLI_API_KEY"}, a.DeclaredVars())
	assert.Equal(t, adapters.Capabilities{Resumable: true, RequiresFinished: true, Usage: adapters.UsageEvents}, a.Capabilities())

	in := adapters.Input{Prompt: "hello", Workdir: "/workspace", Home: "/home/u",
		Env: map[string]string{"MYCLI_API_KEY": "MARK-secret-1", "OTHER": "declared"}}
	cmd, err := a.Request(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"mycli", "run", "--cwd=/workspace"}, cmd.Args, "empty groups are left out")
	assert.Equal(t, "hello", string(cmd.Stdin))
	assert.Equal(t, "/workspace/sub", cmd.Dir)
	assert.Equal(t, map[string]string{"MYCLI_API_KEY": "MARK-secret-1", "MYCLI_COLOR": "never", "OTHER": "declared"}, cmd.Env)
	assert.NotContains(t, strings.Join(cmd.Args, " "), "MARK-secret-1")

	in.Model, in.Continue = "big-1", "sess-42"
	cmd, err = a.Request(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"mycli", "run", "--model", "big-1", "--resume", "sess-42", "--cwd=/workspace"}, cmd.Args)

	for name, bad := range map[string]adapters.Input{
		"missing secret": {Prompt: "p"},
		"flag as id":     {Prompt: "p", Continue: "--rm", Env: in.Env},
		"fork":           {Prompt: "p", Continue: "a", Fork: true, Env: in.Env},
		"empty prompt":   {Env: in.Env},
	} {
		_, err := a.Request(bad)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%s: %v", name, err)
	}
	_, err = a.Request(adapters.Input{Prompt: "p"})
	assert.Contains(t, err.Error(), "secret MYCLI_API_KEY is not set")

	ep, err := Parse([]byte(`{"id":"ep","binary":"b","env":{"BASE":"${input.endpoint}"},"args":[["--base","${input.endpoint}"]],"output":{"mode":"text"}}`), "ep.json")
	require.NoError(t, err)
	cmd, err = New(ep).Request(adapters.Input{Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:9"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "--base", "http://127.0.0.1:9"}, cmd.Args)
	assert.Equal(t, "http://127.0.0.1:9", cmd.Env["BASE"])
	cmd, err = New(ep).Request(adapters.Input{Prompt: "p"})
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, cmd.Args, "no endpoint: the group is left out")

	text, err := Parse([]byte(textSpec), "echo.json")
	require.NoError(t, err)
	assert.False(t, New(text).Capabilities().Resumable)
	assert.Equal(t, adapters.UsageUnavailable, New(text).Capabilities().Usage)
}
