package docker

import (
	"context"
	"errors"
	"sync"
)

// removals tracks the containers of released leases that the engine is
// still removing: Release returns once a container has stopped (every
// process in it ended), and the engine's auto-removal, with the forced
// removal as its fallback, finishes in the background. The zero value is
// ready; it is safe for concurrent use.
type removals struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0; nil means closed
	errs []error
}

// add registers one removal under way.
func (r *removals) add() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
}

// done ends one removal; err is kept for the next wait.
func (r *removals) done(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
	}
	r.n--
	if r.n == 0 {
		close(r.idle)
	}
}

// count is the number of removals under way.
func (r *removals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// wait returns once no removal is under way, or with ctx's error; it
// returns (and forgets) the errors of the removals that ended.
func (r *removals) wait(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	busy := r.n > 0
	r.mu.Unlock()
	if busy {
		select {
		case <-idle:
		case <-ctx.Done():
			return errors.Join(r.takeErrs(), engineError(context.Cause(ctx), "wait for the removal of released containers"))
		}
	}
	return r.takeErrs()
}

func (r *removals) takeErrs() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.errs...)
	r.errs = nil
	return err
}
