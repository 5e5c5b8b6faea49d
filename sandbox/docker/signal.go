package docker

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// CleanupOnSignal releases every live lease of p when the process receives
// one of sigs (default SIGINT, SIGTERM, SIGHUP and SIGQUIT), each removal bounded by timeout
// (zero: Options.ReleaseTimeout). It returns stop, which unregisters the
// handler and waits for a cleanup in progress.
//
// It does not end the process: the caller's own handling (typically
// signal.NotifyContext at the root of the CLI) still sees the signal and
// winds the run down. After the first signal the handler unregisters
// itself, so a second Ctrl-C gets the default behaviour again (or the
// caller's). onDone, if not nil, receives the joined release error.
func CleanupOnSignal(p *Provider, timeout time.Duration, onDone func(error), sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		sigs = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
	}
	if timeout <= 0 {
		timeout = p.opts.ReleaseTimeout
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
			err := p.ReleaseAll(ctx)
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
