package harness

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// limitProcess is an ended process whose sandbox reports limits.
type limitProcess struct {
	limits []string
	asked  int
}

func (p *limitProcess) Stdout() io.Reader                      { return nil }
func (p *limitProcess) Stderr() io.Reader                      { return nil }
func (p *limitProcess) Stdin() io.WriteCloser                  { return nil }
func (p *limitProcess) Wait() (sandbox.ExitStatus, error)      { return sandbox.ExitStatus{}, nil }
func (p *limitProcess) Signal(syscall.Signal) error            { return nil }
func (p *limitProcess) Close() error                           { return nil }
func (p *limitProcess) LimitsReached(context.Context) []string { p.asked++; return p.limits }

// TestLimitReached: a failed turn whose sandbox refused a fork at its pids
// limit becomes a process failure naming the limit, not retryable (a
// timeout's retry flag does not survive); success, quota, budget and
// cancellation are neither asked about nor changed.
func TestLimitReached(t *testing.T) {
	timeout := &outposterr.Error{Class: outposterr.Timeout, Message: "fake: turn exceeded its deadline of 15s",
		Details: outposterr.Details{Agent: "fake", Retryable: true, Unavailable: "overloaded"}}
	p := &limitProcess{limits: []string{sandbox.LimitPids}}
	err := limitReached(context.Background(), "fake", p, timeout)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
	assert.Equal(t, sandbox.LimitPids, outposterr.LimitReason(err))
	assert.False(t, outposterr.IsRetryable(err), "the same turn in the same sandbox hits the limit again")
	assert.False(t, outposterr.IsUnavailable(err))
	assert.Equal(t, "fake", outposterr.DetailsOf(err).Agent)
	assert.Equal(t, "fake: the sandbox's limit on processes was reached (a fork was refused): turn exceeded its deadline of 15s", err.Error())

	exited := &outposterr.Error{Class: outposterr.Process, Message: "fake: CLI exited 0 without its final event",
		Details: outposterr.Details{Agent: "fake", Exited: true}}
	err = limitReached(context.Background(), "fake", p, exited)
	assert.Equal(t, sandbox.LimitPids, outposterr.LimitReason(err))
	assert.True(t, outposterr.DetailsOf(err).Exited)

	assert.Equal(t, 2, p.asked)
	for _, unchanged := range []error{
		nil,
		outposterr.New(outposterr.Quota, "quota"),
		outposterr.New(outposterr.Process, "stopped").With(outposterr.Details{Budget: "cost"}),
		outposterr.New(outposterr.Process, "killed: out of memory").With(outposterr.Details{Limit: sandbox.LimitMemory}),
		outposterr.New(outposterr.Aborted, "turn cancelled"),
	} {
		assert.Equal(t, unchanged, limitReached(context.Background(), "fake", p, unchanged))
	}
	assert.Equal(t, 2, p.asked, "only failures the CLI's conduct explains are asked about")

	none := &limitProcess{}
	assert.Equal(t, error(timeout), limitReached(context.Background(), "fake", none, timeout))
	plain := struct{ sandbox.Process }{p} // no LimitReporter
	assert.True(t, errors.Is(limitReached(context.Background(), "fake", plain, timeout), timeout))
}

// vanishing is a lease that reports itself gone once the CLI has started,
// as a container removed (docker rm -f) or a pod deleted mid-turn is.
type vanishing struct {
	sandbox.Sandbox
	gone *atomic.Bool
}

func (v vanishing) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	p, err := v.Sandbox.Exec(ctx, cmd)
	if len(cmd.Args) > 3 && cmd.Args[3] == "outpost-probe" {
		v.gone.Store(true) // the CLI (its exec starts with the workspace probe)
	}
	return p, err
}

func (v vanishing) Gone(context.Context) string {
	if v.gone.Load() {
		return "container 0123456789ab was removed while the lease was held"
	}
	return ""
}

// wrappingProvider hands out its Provider's leases wrapped by wrap.
type wrappingProvider struct {
	sandbox.Provider
	wrap func(sandbox.Sandbox) sandbox.Sandbox
}

func (p wrappingProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	return p.wrap(sb), nil
}

// TestVanishedLeaseIsSandbox: a CLI killed because its lease disappeared
// mid-turn is a retryable sandbox failure naming the lease, not a process
// failure of the CLI; the same failure in a lease that still exists stays a
// process failure.
func TestVanishedLeaseIsSandbox(t *testing.T) {
	var gone atomic.Bool
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
exit 137`)
	turn.Provider = wrappingProvider{turn.Provider, func(sb sandbox.Sandbox) sandbox.Sandbox { return vanishing{sb, &gone} }}
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err), "%v", err)
	assert.True(t, outposterr.IsRetryable(err))
	assert.Contains(t, err.Error(), "the sandbox disappeared during the turn: container 0123456789ab was removed")

	control := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
exit 137`)
	_, err = Run(context.Background(), control)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
}
