package leasekit

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// CleanupSignals are the signals a provider's CleanupOnSignal handles by
// default: the ones that cancel an outpost command (SIGINT, SIGTERM, SIGHUP
// when the terminal goes away, SIGQUIT for Ctrl-\), so no signal that ends a
// run leaves its leases behind.
var CleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// CleanupOnSignal calls releaseAll, bounded by timeout, when the process
// receives one of sigs (none: [CleanupSignals]), and hands its error to
// onDone when that is not nil. It returns stop, which unregisters the
// handler and waits for a cleanup in progress.
//
// It does not end the process: the caller's own handling still sees the
// signal. After the first signal the handler unregisters itself, so a second
// one gets the default behaviour again (or the caller's).
func CleanupOnSignal(releaseAll func(context.Context) error, timeout time.Duration, onDone func(error), sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		sigs = CleanupSignals
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
			signal.Stop(ch)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := releaseAll(ctx)
			cancel()
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
