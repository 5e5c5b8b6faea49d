//go:build unix

package bootstrap

import "syscall"

func syscallUmask(m int) int { return syscall.Umask(m) }
