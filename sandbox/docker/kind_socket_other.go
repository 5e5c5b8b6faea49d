//go:build !unix

package docker

import "os"

// usableSocket reports whether path exists.
func usableSocket(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
