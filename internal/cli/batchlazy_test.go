package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLazyJobReadsTheSameLineOrFails: a large job's prompt and metadata
// are read again from its line as it starts; a line that changed since it
// was checked is an error, never another job.
func TestLazyJobReadsTheSameLineOrFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	first := `{"id":"a","agent":"x","prompt":"short"}`
	second := `{"id":"b","agent":"x","prompt":"the long one","metadata":{"k":1}}`
	require.NoError(t, os.WriteFile(file, []byte(first+"\n"+second+"\n"), 0o600))
	load := lazyJob(file, 2, int64(len(first)+1), []byte(second))
	p, md, err := load()
	require.NoError(t, err)
	assert.Equal(t, "the long one", p)
	assert.JSONEq(t, `{"k":1}`, string(md))

	changed := `{"id":"b","agent":"x","prompt":"THE LONG ONE","metadata":{"k":1}}`
	require.NoError(t, os.WriteFile(file, []byte(first+"\n"+changed+"\n"), 0o600))
	_, _, err = load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2 changed while the batch ran")

	require.NoError(t, os.WriteFile(file, []byte(first+"\n"), 0o600))
	_, _, err = load()
	require.Error(t, err, "a truncated file")
}
