//go:build unix

package safefs

import (
	"io/fs"
	"syscall"
)

// openNonblock keeps opening a pipe from blocking; it has no effect on
// regular files.
const openNonblock = syscall.O_NONBLOCK

// Owner returns the user and group owning the file fi describes; ok is
// false where the platform does not say.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
