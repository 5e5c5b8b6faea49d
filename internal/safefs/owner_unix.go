//go:build unix

package safefs

import (
	"io/fs"
	"syscall"
)

// openNonblock keeps opening a pipe from blocking; it has no effect on
// regular files.
const openNonblock = syscall.O_NONBLOCK

func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
