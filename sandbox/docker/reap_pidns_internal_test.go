package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnerLabelsHelper is the child of TestReapSparesOwnersInAnotherPIDNamespace: it
// prints its owner labels and lives until its input closes.
func TestOwnerLabelsHelper(t *testing.T) {
	if os.Getenv("OUTPOST_OWNER_LABELS_HELPER") != "1" {
		t.Skip("helper process")
	}
	_ = json.NewEncoder(os.Stdout).Encode(ownerLabels())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// An outpost running in another pid namespace with this host's name (a
// container on the host network sharing the engine's socket) labels its
// containers with a pid this host does not know, or knows as another
// process: gc here must not take that live owner for a dead one.
func TestReapSparesOwnersInAnotherPIDNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs unshare and root to start a process in a new pid namespace")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestOwnerLabelsHelper$")
	cmd.Env = append(os.Environ(), "OUTPOST_OWNER_LABELS_HELPER=1")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	var labels map[string]string
	if err := json.NewDecoder(out).Decode(&labels); err != nil {
		t.Skipf("no pid namespace here: %v", err)
	}
	host, _ := os.Hostname()
	require.Equal(t, host, labels[LabelOwnerHost], "the child shares this host's name")
	labels[LabelManaged] = "true"
	f := &fakeReapClient{containers: []container.Summary{{ID: "live-elsewhere", Labels: labels, Created: time.Now().Unix()}}}
	left, err := Reap(context.Background(), f, ReapOptions{})
	require.NoError(t, err)
	assert.Empty(t, left, "the live owner's container (pid %s in its own pid namespace) counts as left over", labels[LabelOwnerPID])
	assert.Empty(t, f.removed)
}
