package e2e_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters/driver"
)

// TestReadmeExampleCompiles keeps the README's library example identical to
// example_test.go, which the compiler checks.
func TestReadmeExampleCompiles(t *testing.T) {
	code := readmeBlock(t, "```go\n", "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"os\"\n\n\t\"github.com/outpost-dev/outpost/adapters\"")
	code = strings.Replace(code, "package main", "package e2e_test", 1)
	code = strings.Replace(code, "func main() {", "// Example_library is the README's library example, compiled with the tests\n// so it cannot rot.\nfunc Example_library() {", 1)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	assert.Equal(t, "// Code below is kept identical to the README's library example.\n\n"+code, string(example))
}

// TestReadmeDriverParses keeps the README's driver example a valid driver.
func TestReadmeDriverParses(t *testing.T) {
	spec, err := driver.Parse([]byte(readmeBlock(t, "```json\n", "{\n  \"id\": \"greeter\"")), "README.md")
	require.NoError(t, err)
	assert.Equal(t, "greeter", spec.ID)
	assert.True(t, driver.New(spec).Capabilities().Resumable)
}

// readmeBlock returns the README's code block opened by fence whose body
// starts with head.
func readmeBlock(t *testing.T, fence, head string) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(readme)
	start := strings.Index(s, fence+head)
	require.NotEqual(t, -1, start, "README has a block starting %q", head)
	start += len(fence)
	end := strings.Index(s[start:], "```")
	require.NotEqual(t, -1, end, "the block is closed")
	return s[start : start+end]
}
