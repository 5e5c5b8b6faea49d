//go:build unix

package conversation

import (
	"errors"
	"os"
	"syscall"
)

// lockStore takes a flock(2) on the store's directory — exclusive to
// change which archive a manifest names, shared to read the pair — and
// returns its release. Every call opens the directory anew, so stores in
// one process exclude each other as stores in two processes do; the kernel
// releases the lock if the process dies.
func lockStore(root *os.Root, exclusive bool) (func(), error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(d.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return func() { d.Close() }, nil // closing the descriptor releases the lock
}
