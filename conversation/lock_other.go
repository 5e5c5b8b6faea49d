//go:build !unix

package conversation

import (
	"os"
	"sync"
)

// storeLock stands in for flock(2) where there is none: it orders the
// stores of this process only.
var storeLock sync.RWMutex

func lockStore(_ *os.Root, exclusive bool) (func(), error) {
	if exclusive {
		storeLock.Lock()
		return storeLock.Unlock, nil
	}
	storeLock.RLock()
	return storeLock.RUnlock, nil
}
