package credentials

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestPackageIsPure enforces that planning cannot touch the disk, the
// network, processes or the environment: no such import in any non-test file.
func TestPackageIsPure(t *testing.T) {
	forbidden := []string{"os", "os/exec", "io/fs", "io/ioutil", "net", "net/http", "syscall", "path/filepath", "time", "golang.org/x/sys/unix"}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				assert.NotEqual(t, bad, p, "%s imports %s: credentials planning must stay pure", f, p)
			}
		}
		checked++
	}
	assert.Positive(t, checked)
}

func TestParseAuth(t *testing.T) {
	for in, want := range map[string]Auth{
		"account": {Form: Account}, "account:file": {Form: Account, Source: SourceFile},
		"account:variable": {Form: Account, Source: SourceVariable}, "usage": {Form: Usage}, "none": {Form: None},
	} {
		got, err := ParseAuth(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
		assert.Equal(t, in, got.String())
	}
	for _, bad := range []string{"", "keychain", "account:keyring"} {
		_, err := ParseAuth(bad)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), bad)
	}
}

func TestDeclared(t *testing.T) {
	env := map[string]string{"FROM_PROC": "p", "BOTH": "proc-value", "SAME": "same"}
	proc := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	got, err := Declared(map[string]string{"INHERIT": "", "FROM_PROC": "", "FILE_ONLY": "f", "SAME": "same"}, proc, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"FROM_PROC": "p", "FILE_ONLY": "f", "SAME": "same"}, got,
		"an empty declaration inherits; an unset one stays absent; undeclared names never leak")

	_, err = Declared(map[string]string{"BOTH": "file-value"}, proc, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BOTH")
	assert.NotContains(t, err.Error(), "file-value")
	assert.NotContains(t, err.Error(), "proc-value")

	got, err = Declared(nil, proc, []string{"FROM_PROC"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "p", got["FROM_PROC"])

	_, err = Declared(map[string]string{"FILE_ONLY": "f"}, proc, []string{"FILE_ONLY"}, nil)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "two sources for one name")
	_, err = Declared(nil, proc, []string{"UNSET"}, nil)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
}

// TestDeclaredRefusesUnusable: reserved names, non-names and values no
// environment can carry are configuration errors naming the variable,
// never showing the value.
func TestDeclaredRefusesUnusable(t *testing.T) {
	big := strings.Repeat("v", MaxVarBytes+1)
	env := map[string]string{"PATH": "/usr/bin", "BIG": big}
	proc := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for name, tc := range map[string]struct {
		file    map[string]string
		forward []string
		want    string
	}{
		"reserved in file":   {file: map[string]string{"HOME": "MARK-home"}, want: "HOME is reserved"},
		"reserved forwarded": {forward: []string{"PATH"}, want: "PATH is reserved"},
		"loader":             {file: map[string]string{"LD_PRELOAD": "MARK-x"}, want: "LD_PRELOAD is reserved"},
		"relocation":         {file: map[string]string{"CODEX_HOME": "MARK-x"}, want: "CODEX_HOME is reserved"},
		"not a name":         {file: map[string]string{"A-B": "MARK-x"}, want: `"A-B" is not a variable name`},
		"NUL in file":        {file: map[string]string{"TOKEN": "MARK-a\x00b"}, want: "TOKEN in .outpost/.env: the value contains a NUL byte"},
		"huge inherited":     {file: map[string]string{"BIG": ""}, want: "BIG (from the environment): the value is"},
	} {
		_, err := Declared(tc.file, proc, tc.forward, []string{"CODEX_HOME"})
		require.Error(t, err, name)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), name)
		assert.Contains(t, err.Error(), tc.want, name)
		assert.NotContains(t, err.Error(), "MARK-", name)
	}
	assert.True(t, Reserved("XDG_CONFIG_HOME"))
	assert.True(t, Reserved("OUTPOST_CODEX_API_KEY"))
	assert.False(t, Reserved("ANTHROPIC_API_KEY"))
	assert.False(t, Reserved("CODEX_HOME"), "a CLI's relocation variable is reserved when the registry says so")
	assert.True(t, Reserved("CODEX_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"))
}

func TestMergeJSON(t *testing.T) {
	out, err := MergeJSON([]byte(`{"keep":1,"mcpServers":{"old":{"command":"x"}}}`), []string{"mcpServers"},
		map[string]any{"new": map[string]any{"command": "y"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"keep":1,"mcpServers":{"old":{"command":"x"},"new":{"command":"y"}}}`, string(out))

	out, err = MergeJSON(nil, []string{"a", "b"}, map[string]any{"c": true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":{"b":{"c":true}}}`, string(out))

	_, err = MergeJSON([]byte(`{"a":3}`), []string{"a"}, map[string]any{"x": 1})
	assert.Error(t, err)
	_, err = MergeJSON([]byte(`[1]`), nil, nil)
	assert.Error(t, err)
}

func TestHostPathAndDest(t *testing.T) {
	f := HostFile{Path: ".claude/.credentials.json", RelocateVar: "CLAUDE_CONFIG_DIR"}
	assert.Equal(t, "/home/u/.claude/.credentials.json", f.HostPath("/home/u", ""))
	assert.Equal(t, "/cfg/claude/.credentials.json", f.HostPath("/home/u", "/cfg/claude"))
	for p, ok := range map[string]bool{".claude/x": true, "/etc/x": false, "../x": false, "a/../../x": false, "": false, "a//b": false} {
		assert.Equal(t, ok, ValidDest(p), p)
	}
}
