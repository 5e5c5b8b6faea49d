//go:build unix

package cli

import (
	"errors"
	"os"
	"syscall"
)

// noFollowResults: a run directory's results file is never a link.
const noFollowResults = syscall.O_NOFOLLOW

// lockExclusive takes an exclusive flock(2) on f without waiting; the
// kernel releases it when f is closed or the process dies.
func lockExclusive(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errors.New("locked")
	}
	return err
}
