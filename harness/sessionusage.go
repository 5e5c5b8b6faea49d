package harness

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
)

// sessionUsageTimeout bounds the read-only usage command run after a turn.
const sessionUsageTimeout = 10 * time.Second

// sessionUsageLimit bounds its output.
const sessionUsageLimit = 16 << 20

// readSessionUsage runs the adapter's session-usage reader in the sandbox
// after the turn and folds its report into the collector's ledger. Any
// failure leaves usage as the events reported it (incomplete).
func readSessionUsage(ctx context.Context, a adapters.Adapter, sb sandbox.Sandbox, home string, col *collector) {
	su, ok := a.(adapters.SessionUsage)
	if !ok || a.Capabilities().Usage != adapters.UsageSession || col.res.Conversation == "" {
		return
	}
	cmd, ok := su.SessionUsageCommand(home, col.res.Conversation)
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, sessionUsageTimeout)
	defer cancel()
	p, err := sb.Exec(rctx, cmd)
	if err != nil {
		col.res.Warnings = append(col.res.Warnings, "read session usage: "+err.Error())
		return
	}
	defer p.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()); close(done) }()
	var out bytes.Buffer
	_, _ = io.Copy(&out, io.LimitReader(p.Stdout(), sessionUsageLimit))
	st, _ := p.Wait()
	<-done
	if !st.Success() {
		return
	}
	if r, ok := su.ParseSessionUsage(out.Bytes()); ok {
		col.ledger.Add(r)
	}
}
