//go:build !unix

package bootstrap

func syscallUmask(m int) int { return 0 }
