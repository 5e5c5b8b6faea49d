package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/typed"
)

const verdictSchema = `{"type":"object","properties":{"verdict":{"enum":["pass","fail"]},"score":{"type":"integer"}},` +
	`"required":["verdict","score"],"additionalProperties":false}`

// answerTurn is a typed turn of the fake acting as a model that answers
// with the given lines in order; it returns the file its prompts land in.
func answerTurn(t *testing.T, answers ...string) (Turn, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "answers")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(answers, "\n")+"\n"), 0o600))
	turn := fakeTurn(t, "judge MARK-1")
	turn.Input.Env = map[string]string{fakecli.AnswersEnv: file}
	turn.Schema = mustSchema(t, verdictSchema)
	return turn, file + ".prompts"
}

func prompts(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var p string
		require.NoError(t, json.Unmarshal([]byte(l), &p))
		out = append(out, p)
	}
	return out
}

func TestTypedValid(t *testing.T) {
	turn, log := answerTurn(t, `{"verdict": "pass", "score": 7}`)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.JSONEq(t, `{"verdict":"pass","score":7}`, string(res.Value))
	assert.False(t, res.Repaired)
	p := prompts(t, log)
	require.Len(t, p, 1, "no repair turn")
	assert.True(t, strings.HasPrefix(p[0], "judge MARK-1\n\nReply with only one JSON value"), "without native support the prompt asks: %q", p[0])
	assert.Contains(t, p[0], `"required":["verdict","score"]`)
}

func TestTypedRepairedOnce(t *testing.T) {
	turn, log := answerTurn(t, `Sure: it passes.`, `{"verdict":"fail","score":2}`)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.JSONEq(t, `{"verdict":"fail","score":2}`, string(res.Value))
	assert.True(t, res.Repaired)
	assert.Equal(t, "answer-1", res.Conversation)
	p := prompts(t, log)
	require.Len(t, p, 2, "exactly one repair turn")
	assert.Contains(t, p[1], "Your previous answer cannot be used: the answer is not a JSON value")
	assert.Equal(t, 2, res.Counts[adapters.KindResult], "both turns are counted")
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "one repair turn ran")
}

func TestTypedStillInvalidIsProtocol(t *testing.T) {
	turn, log := answerTurn(t, `{"verdict":"maybe","score":1}`, `{"verdict":"pass"}`, `{"verdict":"pass","score":1}`)
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Protocol, outposterr.ClassOf(err))

	assert.Contains(t, err.Error(), "missing property 'score'")
	assert.Contains(t, err.Error(), "after one repair turn")
	assert.Nil(t, res.Value)
	assert.Len(t, prompts(t, log), 2, "never a second repair turn")
	assert.Contains(t, prompts(t, log)[1], "at /verdict", "the repair prompt names what failed")
}

func TestTypedNotResumableIsProtocol(t *testing.T) {
	turn, log := answerTurn(t, `nope`)
	turn.Adapter = &fakecli.Adapter{Path: turn.Adapter.Binary(), Caps: &adapters.Capabilities{RequiresFinished: true}}
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Protocol, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "no repair turn: the CLI cannot continue the conversation")
	assert.Len(t, prompts(t, log), 1)
}

func TestTypedFailedTurnKeepsItsClass(t *testing.T) {
	turn, _ := answerTurn(t) // no answer: the fake fails
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
}

func TestTypedBadSchema(t *testing.T) {
	turn, log := answerTurn(t, `{}`)
	_, err := typed.Compile([]byte(`{"type":"strin"}`))
	require.Error(t, err, "a bad schema is refused when compiled, before any turn")
	assert.NoFileExists(t, log, "nothing ran")

	turn.Schema = mustSchema(t, verdictSchema)
	turn.Live = make(chan string)
	_, err = Run(context.Background(), turn)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
}

// structuredTurn runs the fake as a CLI with native structured output in a
// warm host lease, so what the turn leaves in its home can be inspected.
func structuredTurn(t *testing.T, script string) (Turn, sandbox.Sandbox) {
	t.Helper()
	turn := fakeTurn(t, script)
	turn.Adapter = &fakecli.Adapter{Path: turn.Adapter.Binary(), Caps: &adapters.Capabilities{
		Resumable: true, RequiresFinished: true, StructuredOutput: true, Usage: adapters.UsageEvents}}
	turn.Schema = mustSchema(t, verdictSchema)
	sb, err := host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}, TempDir: t.TempDir()}).
		Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Release(context.Background()) })
	turn.Sandbox, turn.Provider = sb, nil
	return turn, sb
}

func scratchLeft(t *testing.T, sb sandbox.Sandbox) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(sb.Home(), scratchPrefix+"*"))
	require.NoError(t, err)
	return left
}

func TestTypedNativeSchemaFileRemoved(t *testing.T) {
	turn, sb := structuredTurn(t, `cat-schema
emit {"type":"result","text":"{\"verdict\":\"pass\",\"score\":3}"}
emit {"type":"finished","ok":true}`)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.JSONEq(t, `{"verdict":"pass","score":3}`, string(res.Value))
	require.NotEmpty(t, res.Events)
	var texts []string
	for _, ev := range res.Events {
		if ev.Kind == adapters.KindText {
			texts = append(texts, ev.Text)
		}
	}
	assert.Equal(t, []string{"schema: " + verdictSchema}, texts, "the CLI read the schema file during the turn")
	assert.Empty(t, scratchLeft(t, sb), "the schema file is gone after the turn")
}

func TestTypedNativeSchemaFileRemovedOnFailureAndCancel(t *testing.T) {
	turn, sb := structuredTurn(t, `exit 3`)
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Empty(t, scratchLeft(t, sb), "removed after a failed turn")

	turn, sb = structuredTurn(t, `cat-schema
hang`)
	ctx, cancel := context.WithCancel(context.Background())
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText && strings.HasPrefix(ev.Text, "schema: ") {
			cancel() // the file exists and the CLI hangs
		}
	}
	_, err = Run(ctx, turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
	assert.Empty(t, scratchLeft(t, sb), "removed after cancellation")
}

func TestTeardownIdempotent(t *testing.T) {
	sb, err := host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}, TempDir: t.TempDir()}).
		Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	defer sb.Release(context.Background())
	dir := newScratch(sb.Home())
	td, err := materializeTurnFiles(context.Background(), sb, dir, []adapters.TurnFile{{Name: "a.json", Data: []byte("{}")}})
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(dir, "a.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	require.NoError(t, td.Close(context.Background()))
	require.NoError(t, td.Close(context.Background()), "a second close is a no-op")
	assert.NoDirExists(t, dir)

	_, err = materializeTurnFiles(context.Background(), sb, newScratch(sb.Home()), []adapters.TurnFile{{Name: "../x", Data: nil}})
	assert.Error(t, err, "a turn file name is a plain name")
}

func mustSchema(t *testing.T, s string) *typed.Schema {
	t.Helper()
	c, err := typed.Compile([]byte(s))
	require.NoError(t, err)
	return c
}

// TestValidateTypedNativeNeedsNoLease: a typed turn of a CLI with native
// structured output (its schema goes in a turn file) validates before any
// lease exists.
func TestValidateTypedNativeNeedsNoLease(t *testing.T) {
	turn := Turn{Adapter: codex.New(), Input: adapters.Input{Prompt: "judge"}, Schema: mustSchema(t, verdictSchema)}
	assert.NoError(t, turn.Validate())
}
