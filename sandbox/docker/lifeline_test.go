package docker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// holderEnv makes the test binary a lease holder: TestMain then acquires
// one lease on the engine the variable describes (JSON endpoint), prints
// the container id and waits to be killed.
const holderEnv = "OUTPOST_TEST_DOCKER_LEASE_HOLDER"

func TestMain(m *testing.M) {
	if v := os.Getenv(holderEnv); v != "" {
		os.Exit(holdLease(v))
	}
	os.Exit(m.Run())
}

// holdLease is the holder process: it never releases its lease.
func holdLease(endpoint string) int {
	var ep docker.Endpoint
	if err := json.Unmarshal([]byte(endpoint), &ep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Options{Host: ep.Host, SSHFlags: ep.SSHFlags, RunID: "test-holder-" + uuid.NewString(), Version: "test", Network: "host"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb, err := p.Acquire(ctx, sandbox.Spec{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Commands in flight, as in a turn: the first one run by the lease's
	// keeper, the second an exec.
	var proc sandbox.Process
	for range 2 {
		proc, err = sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "3600"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(sb.ID())
	_, _ = proc.Wait()
	return 0
}

// TestLeaseDiesWithRunner: the container of a process killed with SIGKILL
// while it holds a lease (a command running in it) ends and is removed by
// the engine within a minute, with nobody running the reaper.
func TestLeaseDiesWithRunner(t *testing.T) {
	cli := engine(t)
	ep, err := json.Marshal(current().endpoint)
	require.NoError(t, err)
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), holderEnv+"="+string(ep))
	holder.Stderr = os.Stderr
	out, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the holder did not report its lease")
	id := strings.TrimSpace(line)
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}) })
	ins, err := cli.ContainerInspect(context.Background(), id)
	require.NoError(t, err)
	require.True(t, ins.State.Running)

	require.NoError(t, holder.Process.Signal(syscall.SIGKILL))
	_ = holder.Wait()
	killed := time.Now()
	// The bound is the promise (a minute); it ends in seconds.
	for {
		_, err := cli.ContainerInspect(context.Background(), id)
		// Podman may answer "does not exist in database: no such
		// container" while it removes it, which is not a NotFound.
		if cerrdefs.IsNotFound(err) || (err != nil && strings.Contains(err.Error(), "no such container")) {
			break
		}
		require.NoError(t, err)
		require.Less(t, time.Since(killed), 75*time.Second, "container %s outlived its runner", id)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("container removed %v after its runner was killed", time.Since(killed).Round(100*time.Millisecond))
}

// TestLeaseOutlivesSetup: a lease whose runner lives keeps running well
// past the deadline of the control call that attached its lifeline.
func TestLeaseOutlivesSetup(t *testing.T) {
	const opTimeout = 5 * time.Second
	p := newProvider(t, docker.Options{OpTimeout: opTimeout})
	ctx := context.Background()
	// On a loaded machine a create or start can miss this short deadline,
	// which is not what this test checks: such an acquisition is tried
	// again, a few times at most.
	var sb sandbox.Sandbox
	for attempt := 1; sb == nil; attempt++ {
		s, err := p.Acquire(ctx, sandbox.Spec{})
		if err != nil {
			require.Less(t, attempt, 4, "acquire: %v", err)
			t.Logf("acquire, attempt %d: %v", attempt, err)
			continue
		}
		sb = s
		t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
	}
	r := run(ctx, t, sb, sh(fmt.Sprintf(`sleep %d; echo alive`, int(opTimeout/time.Second)+2)))
	require.True(t, r.status.Success(), r.stderr)
	r = run(ctx, t, sb, sh(`echo still`))
	require.True(t, r.status.Success(), r.stderr)
	assert.Equal(t, "still\n", r.stdout)
	assert.Empty(t, sb.(sandbox.Vanishing).Gone(ctx))
}
