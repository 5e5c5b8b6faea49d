//go:build unix

package docker

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// hostSignalName names a signal value of this host ("SIGTERM"); the
// container receives it by name, so hosts with other numbering work.
func hostSignalName(sig syscall.Signal) string { return unix.SignalName(sig) }
