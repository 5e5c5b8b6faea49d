package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	outpostcli "github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// buildOutpost compiles the outpost command into a temp dir.
func buildOutpost(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outpost")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/outpost").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// TestSIGINTRemovesContainer interrupts a running `outpost run` in Docker
// while the CLI waits on a hanging model server: the command must exit 130
// and its container must be gone.
func TestSIGINTRemovesContainer(t *testing.T) {
	testenv.Short(t)
	claudeBin := testenv.CLI(t, "claude")
	dockerEnv(t, claudeBin) // gates on the engine and the image
	cli, err := docker.NewClient("")
	require.NoError(t, err)
	defer cli.Close()
	outpost := buildOutpost(t)

	ws := workspace(t)
	cmd := exec.Command(outpost, "run", "--agent", "claude", "--offline", "--scenario", "hang", "--workspace", ws, "--json", "MARK-sigint")
	// The default conversation store lands in the state directory.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(claudeBin)+":"+os.Getenv("PATH"), "OUTPOST_STATE_DIR="+t.TempDir())
	cmd.Dir = t.TempDir()
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	owned := func() int {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", docker.LabelOwnerPID+"="+strconv.Itoa(pid)))})
		require.NoError(t, err)
		return len(list)
	}
	require.Eventually(t, func() bool { return owned() == 1 && strings.Contains(stdout.String(), `"conversation"`) },
		60*time.Second, 100*time.Millisecond, "the turn started in a container")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, int(outpostcli.ExitAborted), exit.ExitCode())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("outpost did not exit after SIGINT")
	}
	assert.Zero(t, owned(), "the container is gone when outpost exits")
	assert.Contains(t, stdout.String(), `"class":"aborted"`)
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
