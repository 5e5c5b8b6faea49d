//go:build !unix

package safefs

import "io/fs"

const openNonblock = 0

func fileOwner(fs.FileInfo) (int, bool) { return 0, false }
