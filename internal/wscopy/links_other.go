//go:build !unix

package wscopy

import "io/fs"

// shared reports whether the file fi describes has other names (hard
// links); where the platform does not say, it has none.
func shared(fs.FileInfo) bool { return false }
