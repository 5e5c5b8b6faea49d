//go:build !unix

package cli

import "os"

// usableSocket reports whether path exists.
func usableSocket(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
