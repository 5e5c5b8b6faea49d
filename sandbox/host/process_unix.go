//go:build unix

package host

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/outpost-dev/outpost/sandbox"
)

// sysProcAttr makes the command the leader of a new session and process
// group, so signalling -pid reaches everything it spawned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// killGroup sends sig to the process group led by pid. A group that no
// longer exists (ESRCH) is already gone, which is success.
func killGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return fmt.Errorf("invalid process group %d", pid)
	}
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// exitStatus converts a wait status: a signalled process has Code -1 and the
// signal's name.
func exitStatus(ps *os.ProcessState) sandbox.ExitStatus {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return sandbox.ExitStatus{Code: ps.ExitCode()}
	}
	if ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = fmt.Sprintf("SIG%d", int(ws.Signal()))
		}
		return sandbox.ExitStatus{Code: -1, Signal: name}
	}
	return sandbox.ExitStatus{Code: ws.ExitStatus()}
}

// supported reports whether the platform can run host sandboxes.
func supported() error { return nil }
