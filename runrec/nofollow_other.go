//go:build !unix

package runrec

// noFollow is unavailable here; readers check the file type with Lstat first.
const noFollow = 0
