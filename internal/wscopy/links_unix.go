//go:build unix

package wscopy

import (
	"io/fs"
	"syscall"
)

// shared reports whether the file fi describes has other names (hard
// links) than the one it was found at.
func shared(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}
