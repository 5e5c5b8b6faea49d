package procowner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPolicyLeftover(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p := Policy{Grace: time.Hour, Hostname: "here", Now: func() time.Time { return now },
		Alive: func(pid int, start string) bool { return pid == 1 && start == "s" }}
	old, fresh := now.Add(-2*time.Hour), now.Add(-time.Minute)

	_, left := p.Leftover(Owner{PID: 1, Host: "here", Start: "s"}, old, "it")
	assert.False(t, left, "a live owner keeps even an old resource")
	reason, left := p.Leftover(Owner{PID: 1, Host: "here", Start: "other"}, fresh, "it")
	assert.True(t, left, "a reused pid is not the owner")
	assert.Equal(t, "owner process 1 is gone", reason)

	_, left = p.Leftover(Owner{PID: 7, Host: "there"}, fresh, "it")
	assert.False(t, left, "another host's resource within the grace")
	reason, left = p.Leftover(Owner{PID: 7, Host: "there"}, old, "its last sign of life")
	assert.True(t, left)
	assert.Equal(t, "owner cannot be checked here and its last sign of life is older than 1h0m0s", reason)
	_, left = p.Leftover(Owner{}, time.Time{}, "it")
	assert.False(t, left, "no owner and no age: kept")
	_, left = p.Leftover(Owner{PID: 7}, old, "it")
	assert.True(t, left, "no host recorded: judged by age")

	p.Grace = -1
	_, left = p.Leftover(Owner{PID: 7, Host: "there"}, old, "it")
	assert.False(t, left, "a negative grace never reaps by age")

	var d Policy
	d.Defaults(time.Minute)
	assert.Equal(t, time.Minute, d.Grace)
	assert.NotNil(t, d.Now)
	assert.NotNil(t, d.Alive)
}
