package outpost_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeLibraryExample keeps the README's library example identical to
// Example, which go test compiles and runs.
func TestReadmeLibraryExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	const head = "```go\npackage main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"os\"\n\n\t\"github.com/outpost-dev/outpost\"\n"
	s := string(readme)
	start := strings.Index(s, head)
	require.NotEqual(t, -1, start, "README has the library example")
	start += len("```go\n")
	end := strings.Index(s[start:], "```")
	require.NotEqual(t, -1, end)
	code := s[start : start+end]
	code = strings.Replace(code, "package main", "package outpost_test", 1)

	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	// The example file is the README's program with Example's doc comment,
	// name and expected output.
	got := string(example)
	got = got[:strings.Index(got, "\n// Example runs")] + "\n" + got[strings.Index(got, "func Example() {"):]
	got = strings.Replace(got, "func Example() {", "func main() {", 1)
	got = strings.Replace(got, "\t// Output: outpost ok: MARK-lib.\n", "", 1)
	assert.Equal(t, code, got)
}
