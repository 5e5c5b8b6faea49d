//go:build !unix

package source

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, cancellation
// kills git alone.
func ownGroup(*exec.Cmd) {}
