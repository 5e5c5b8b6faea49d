//go:build unix

package leasekit

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// HostSignalName names a signal value of this host ("SIGTERM"); a sandbox
// receives it by name, so hosts with other numbering work.
func HostSignalName(sig syscall.Signal) string { return unix.SignalName(sig) }
