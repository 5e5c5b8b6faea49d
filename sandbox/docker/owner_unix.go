//go:build unix

package docker

import (
	"os"
	"syscall"
)

// usableBy reports whether a directory with info fi lets uid:gid enter and
// create files, judged by its owner and mode bits (ACLs are not consulted).
func usableBy(fi os.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uid == 0 {
		return true
	}
	m := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return m&0o300 == 0o300
	case int(st.Gid) == gid:
		return m&0o030 == 0o030
	}
	return m&0o003 == 0o003
}

// fileOwner returns the owner of a file with info fi.
func fileOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
