package leasekit

import (
	"sync"
	"sync/atomic"
)

// ReleaseState is a container lease's release bookkeeping: one Release runs
// at a time, a failed one can be retried, and once one succeeded later
// calls do nothing. The zero value is a lease not released.
type ReleaseState struct {
	releasing atomic.Bool
	mu        sync.Mutex
	released  bool
}

// Release runs release unless an earlier call succeeded, holding back other
// calls and [ReleaseState.Released] meanwhile; release's nil error makes
// the lease released.
func (s *ReleaseState) Release(release func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.releasing.Store(true)
	if err := release(); err != nil {
		return err
	}
	s.released = true
	return nil
}

// Releasing reports whether a Release started (also a failed one): a
// process killed from then on was killed by the release. It never waits.
func (s *ReleaseState) Releasing() bool { return s.releasing.Load() }

// Released reports whether a Release succeeded; it waits for one in
// progress.
func (s *ReleaseState) Released() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}
