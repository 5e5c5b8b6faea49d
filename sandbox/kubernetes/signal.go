package kubernetes

import (
	"os"
	"time"

	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// CleanupOnSignal releases every live lease of p when the process receives
// one of sigs (default SIGINT, SIGTERM, SIGHUP and SIGQUIT, the signals that
// cancel an outpost command), each removal bounded by timeout (zero:
// Options.ReleaseTimeout). It returns stop, which unregisters the handler and
// waits for a cleanup in progress.
//
// It does not end the process: the caller's own handling (typically
// signal.NotifyContext at the root of the CLI) still sees the signal and
// winds the run down. After the first signal the handler unregisters
// itself, so a second Ctrl-C gets the default behaviour again (or the
// caller's). onDone, if not nil, receives the joined release error.
func CleanupOnSignal(p *Provider, timeout time.Duration, onDone func(error), sigs ...os.Signal) (stop func()) {
	if timeout <= 0 {
		timeout = p.opts.ReleaseTimeout
	}
	return leasekit.CleanupOnSignal(p.ReleaseAll, timeout, onDone, sigs...)
}
