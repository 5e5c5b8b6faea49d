//go:build !unix

package procowner

// pidAlive cannot be checked here: report alive, so nothing is reaped by pid.
func pidAlive(pid int) bool { return pid > 0 }
