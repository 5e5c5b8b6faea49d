package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary act as one bootstrapping process.
const helperEnv = "OUTPOST_BOOTSTRAP_TEST_HELPER"

// TestHelperEnsureProcess is not a test: TestEnsureProcesses runs the test
// binary with helperEnv set ("<cache>|<url>|<integrity>") and this
// function then ensures agy once and prints its path.
func TestHelperEnsureProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	parts := strings.SplitN(spec, "|", 3)
	b, err := New(Options{CacheDir: parts[0], Catalog: agyCatalog(t, parts[1], parts[2])})
	require.NoError(t, err)
	e, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)
	fmt.Println("BIN=" + e.BinPath)
}

// TestEnsureProcesses runs several processes against one cache: the file
// lock lets exactly one of them download.
func TestEnsureProcesses(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	url := srv.put("/cli.tar.gz", archive)
	srv.mu.Lock()
	srv.delay = 300 * time.Millisecond
	srv.mu.Unlock()
	cache := t.TempDir()
	const n = 4
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperEnsureProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+cache+"|"+url+"|"+sri(archive))
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		})
	}
	wg.Wait()
	var bin string
	for i := range n {
		require.NoError(t, errs[i], outs[i])
		_, after, ok := strings.Cut(outs[i], "BIN=")
		require.True(t, ok, outs[i])
		got, _, _ := strings.Cut(after, "\n")
		if bin == "" {
			bin = got
		}
		assert.Equal(t, bin, got)
	}
	assert.Equal(t, int64(1), srv.count("/cli.tar.gz"), "downloads")
	assert.FileExists(t, bin)
}
