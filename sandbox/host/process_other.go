//go:build !unix

package host

import (
	"errors"
	"os"
	"syscall"

	"github.com/outpost-dev/outpost/sandbox"
)

var errUnsupported = errors.New("the host sandbox needs a Unix system (process groups)")

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int, sig syscall.Signal) error { return errUnsupported }

func exitStatus(ps *os.ProcessState) sandbox.ExitStatus {
	return sandbox.ExitStatus{Code: ps.ExitCode()}
}

func supported() error { return errUnsupported }
