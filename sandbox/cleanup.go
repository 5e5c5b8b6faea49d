package sandbox

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// cleanupSignals are the signals [CleanupOnSignal] handles by default: the
// ones that cancel an outpost command (SIGINT, SIGTERM, SIGHUP when the
// terminal goes away, SIGQUIT for Ctrl-\), so no signal that ends a run
// leaves its leases behind.
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// CleanupOnSignal calls releaseAll (a provider's ReleaseAll, which removes
// every live lease it holds) when the process receives one of sigs
// (default SIGINT, SIGTERM, SIGHUP and SIGQUIT, the signals that cancel an
// outpost command), bounded by timeout (zero: no bound of its own; a
// provider bounds each Release with its release timeout). onDone, if not
// nil, receives releaseAll's error. It returns stop, which unregisters the
// handler and waits for a cleanup in progress:
//
//	stop := sandbox.CleanupOnSignal(p.ReleaseAll, 0, nil)
//	defer stop()
//
// It does not end the process: the caller's own handling (typically
// signal.NotifyContext at the root of the CLI) still sees the signal and
// winds the run down. After the first signal the handler unregisters
// itself, so a second Ctrl-C gets the default behaviour again (or the
// caller's).
func CleanupOnSignal(releaseAll func(context.Context) error, timeout time.Duration, onDone func(error), sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		sigs = cleanupSignals
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
			signal.Stop(ch)
			err := releaseWithin(releaseAll, timeout)
			if onDone != nil {
				onDone(err)
			}
		case <-quit:
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
			wg.Wait()
		})
	}
}

// releaseWithin runs releaseAll bounded by timeout (zero: unbounded).
func releaseWithin(releaseAll func(context.Context) error, timeout time.Duration) error {
	if timeout <= 0 {
		return releaseAll(context.Background())
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return releaseAll(ctx)
}
