package leasekit

import (
	"os"
	"strconv"
)

// Owner holds the facts that identify the owning process of a lease.
type Owner struct {
	// PID is the owning process's id on Host.
	PID int
	// Host is the host name of the owning process.
	Host string
	// Start is the process's start time (Linux clock ticks since boot, "" when
	// unknown), so a reused pid is not mistaken for the owner.
	Start string
}

// Self describes this process.
func Self() Owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return Owner{PID: pid, Host: host, Start: ProcessStart(pid)}
}

// PIDString is PID in decimal.
func (o Owner) PIDString() string { return strconv.Itoa(o.PID) }

// OwnerAlive reports whether pid exists on this host and, when a start time
// was recorded, still belongs to the process that started then.
func OwnerAlive(pid int, start string) bool {
	if !PidAlive(pid) {
		return false
	}
	if start == "" {
		return true
	}
	now := ProcessStart(pid)
	return now == "" || now == start
}
