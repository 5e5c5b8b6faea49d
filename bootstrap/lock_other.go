//go:build !unix

package bootstrap

import (
	"context"
	"fmt"
	"os"
)

// lockFile only creates the lock file on platforms without flock(2): the
// cache is then shared safely between the goroutines of one process (see
// Bootstrapper's key semaphores) but not between processes; the atomic
// rename of a finished entry still keeps readers from seeing half a tree.
func lockFile(ctx context.Context, path string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
