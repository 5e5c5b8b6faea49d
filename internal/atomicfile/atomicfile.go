// Package atomicfile replaces files atomically: the content goes to a
// temporary file in the same directory, is synced, and is renamed over the
// target, so a reader sees the old file or the new one, never half of one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with content, created with mode perm.
func Write(path string, content []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // a no-op after the rename
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(content)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	return err
}
