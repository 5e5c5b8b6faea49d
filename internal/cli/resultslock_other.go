//go:build !unix

package cli

import "os"

const noFollowResults = 0

// lockExclusive does nothing where there is no flock(2).
func lockExclusive(*os.File) error { return nil }
