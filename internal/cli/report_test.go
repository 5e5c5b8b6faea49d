package cli

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/runrec/runrectest"
)

func TestReportCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, err := runrectest.Sample(dir, os.DirFS("../.."), runrectest.Options{})
	require.NoError(t, err)

	out := execute(t, "", nil, "report", dir)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "TOTAL")

	out = execute(t, "", nil, "report", filepath.Join(dir, "results.jsonl"), "--format", "markdown")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "| **total** |")

	junit := filepath.Join(t.TempDir(), "junit.xml")
	out = execute(t, "", nil, "report", dir, "--format", "junit", "-o", junit)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Empty(t, out.stdout)
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var doc struct {
		Tests int `xml:"tests,attr"`
	}
	require.NoError(t, xml.Unmarshal(b, &doc))
	assert.Equal(t, 14, doc.Tests)

	out = execute(t, "", nil, "report", dir, "--format", "pdf")
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "want one of table, markdown, html, junit, github")

	bad := filepath.Join(t.TempDir(), "r.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"job\":\"a\"}\nnope\n{\"job\":\"b\"}\n"), 0o600))
	out = execute(t, "", nil, "report", bad)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.True(t, strings.Contains(out.stderr, "line 2"), out.stderr)

	out = execute(t, "", nil, "report")
	assert.Equal(t, int(ExitConfiguration), out.code)
}
