//go:build unix

package docker

import (
	"os"

	"golang.org/x/sys/unix"
)

// usableSocket reports whether path is a unix socket this process may
// connect to.
func usableSocket(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	return unix.Access(path, unix.W_OK) == nil
}
