package docker

import (
	"os"

	"github.com/outpost-dev/outpost/internal/safefs"
)

// usableBy reports whether a directory with info fi lets uid:gid enter and
// create files, judged by its owner and mode bits (ACLs are not consulted;
// where ownership is unknown it is taken as usable).
func usableBy(fi os.FileInfo, uid, gid int) bool {
	owner, group, ok := safefs.Owner(fi)
	if !ok || uid == 0 {
		return true
	}
	m := fi.Mode().Perm()
	switch {
	case owner == uid:
		return m&0o300 == 0o300
	case group == gid:
		return m&0o030 == 0o030
	}
	return m&0o003 == 0o003
}
