package procowner

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAlive(t *testing.T) {
	self := Self()
	assert.Equal(t, os.Getpid(), self.PID)
	assert.True(t, Alive(self.PID, self.Start))
	assert.True(t, Alive(self.PID, ""))
	if self.Start != "" {
		assert.False(t, Alive(self.PID, "not-"+self.Start), "a reused pid is not the owner")
	}
	assert.False(t, Alive(0, ""))
	pol := Policy{Hostname: self.Host}
	pol.Defaults(-1)
	_, left := pol.Leftover(self, time.Time{}, "it")
	assert.False(t, left, "this process owns its resources")
	_, left = pol.Leftover(Owner{PID: self.PID + 1, Host: "elsewhere"}, time.Time{}, "it")
	assert.False(t, left, "another host's owner cannot be judged")

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, left = pol.Leftover(Owner{PID: cmd.Process.Pid, Host: self.Host, Start: "1"}, time.Time{}, "it")
	assert.True(t, left, "a dead owner's resources are left over")
}
