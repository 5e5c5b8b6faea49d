package procowner

import (
	"os"
	"os/exec"
	"testing"

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
	assert.False(t, self.Gone(self.Host))
	assert.False(t, Owner{PID: self.PID + 1, Host: "elsewhere"}.Gone(self.Host), "another host's owner cannot be judged")

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	dead := Owner{PID: cmd.Process.Pid, Host: self.Host, Start: "1"}
	assert.True(t, dead.Gone(self.Host))
}
