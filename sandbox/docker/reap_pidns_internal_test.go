package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
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
	var labels map[string]string
	testenv.OtherPIDNamespace(t, "TestOwnerLabelsHelper", "OUTPOST_OWNER_LABELS_HELPER", &labels)
	host, _ := os.Hostname()
	require.Equal(t, host, labels[LabelOwnerHost], "the child shares this host's name")
	labels[LabelManaged] = "true"
	f := &fakeReapClient{containers: []container.Summary{{ID: "live-elsewhere", Labels: labels, Created: time.Now().Unix()}}}
	left, err := Reap(context.Background(), f, ReapOptions{})
	require.NoError(t, err)
	assert.Empty(t, left, "the live owner's container (pid %s in its own pid namespace) counts as left over", labels[LabelOwnerPID])
	assert.Empty(t, f.removed)
}
