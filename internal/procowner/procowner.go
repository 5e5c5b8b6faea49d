// Package procowner identifies the process that owns a resource (a
// container, a host sandbox's directory) so that a later reaper can tell
// leftovers of a dead process from resources of a live one: the pid, the
// host name, and the process's start time, which tells a reused pid from
// the owner.
package procowner

import (
	"os"
	"strconv"
)

// Owner identifies a process on a host.
type Owner struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
	// Start is the process's start time (Linux: clock ticks since boot),
	// "" where it cannot be read.
	Start string `json:"start,omitempty"`
}

// Self returns this process's identity.
func Self() Owner {
	pid := os.Getpid()
	host, _ := os.Hostname()
	return Owner{PID: pid, Host: host, Start: Start(pid)}
}

// Alive reports whether pid exists on this host and, when start was
// recorded, still belongs to the process that started then.
func Alive(pid int, start string) bool {
	if !pidAlive(pid) {
		return false
	}
	if start == "" {
		return true
	}
	now := Start(pid)
	return now == "" || now == start
}

// String is "pid@host".
func (o Owner) String() string { return strconv.Itoa(o.PID) + "@" + o.Host }
