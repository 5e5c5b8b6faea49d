package harness

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/usage"
)

func TestMain(m *testing.M) {
	if fakecli.IsChild() {
		fakecli.Main()
	}
	os.Exit(m.Run())
}

// fakeTurn returns a turn running the fake CLI with script as its prompt in a
// fresh host lease.
func fakeTurn(t *testing.T, script string) Turn {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return Turn{
		Adapter:    fakecli.New(exe),
		Input:      adapters.Input{Prompt: script},
		Provider:   host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}, TempDir: t.TempDir()}),
		KeepEvents: true,
		// The default settle window: a fake that exits slowly after its
		// final event on a loaded machine is not a lingering CLI.
		Limits: Limits{Deadline: 60 * time.Second, Settle: DefaultSettle, KillGrace: 300 * time.Millisecond},
	}
}

func TestRunOK(t *testing.T) {
	var live []adapters.Event
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
emit {"type":"text","text":"hello"}
stderr a harmless note
emit {"type":"usage","scope":"turn","input":5,"output":2,"cost":0.01}
emit {"type":"result","text":"hello"}
emit {"type":"finished","ok":true}`)
	turn.OnEvent = func(ev adapters.Event) { live = append(live, ev) }
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.True(t, res.OK())
	assert.Equal(t, "c1", res.Conversation)
	assert.Equal(t, "hello", res.Text)
	assert.Equal(t, int64(5), res.Usage.Input)
	assert.True(t, res.Usage.Complete)
	assert.Equal(t, 0, res.Exit.Code, "exit %+v warnings %v", res.Exit, res.Warnings)
	assert.True(t, res.Exited)
	assert.Equal(t, res.Events, live, "events reach the caller live, in order")
	assert.Equal(t, 1, res.Counts[adapters.KindStderr])
	assert.Contains(t, res.StderrTail, "a harmless note")
	for i, ev := range res.Events {
		assert.Equal(t, int64(i+1), ev.Seq)
		assert.False(t, ev.Time.IsZero())
	}
}

func TestRunEventsStreamLive(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"text","text":"first"}
sleep 30s
emit {"type":"finished","ok":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan adapters.Event, 16)
	turn.OnEvent = func(ev adapters.Event) {
		got <- ev
		if ev.Kind == adapters.KindText {
			cancel() // the first event arrived while the CLI still sleeps
		}
	}
	res, err := Run(ctx, turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
	assert.Equal(t, "first", (<-got).Text)
	assert.Less(t, res.Duration, 25*time.Second, "cancel stopped the CLI long before its sleep ended")
}

func TestRunFailureClassified(t *testing.T) {
	res, err := Run(context.Background(), fakeTurn(t, `emit {"type":"conversation","id":"c2"}
emit {"type":"failure","text":"quota exhausted reset=+3h"}
emit {"type":"finished","ok":false}
exit 1`))
	require.Error(t, err)
	assert.True(t, outposterr.IsQuota(err))
	reset, ok := outposterr.ResetAt(err)
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(3*time.Hour), reset, time.Minute)
	assert.Equal(t, "c2", res.Conversation, "a failed turn still reports its conversation")
	assert.Equal(t, 1, res.Exit.Code)
}

func TestRunExitZeroWithoutFinished(t *testing.T) {
	_, err := Run(context.Background(), fakeTurn(t, `emit {"type":"text","text":"partial"}`))
	require.Error(t, err)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "without its final event")
}

func TestRunSettleStopsLingeringCLI(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"result","text":"done"}
emit {"type":"finished","ok":true}
hang`)
	turn.Limits.Settle = 300 * time.Millisecond
	res, err := Run(context.Background(), turn)
	require.NoError(t, err, "a CLI lingering after its final event keeps its result")
	assert.Equal(t, "done", res.Text)
	assert.NotEmpty(t, res.Warnings)
	assert.Equal(t, 1, res.Counts[adapters.KindWarning])
}

func TestRunIgnoresSIGTERMThenKilled(t *testing.T) {
	turn := fakeTurn(t, `trap-term
emit {"type":"text","text":"stubborn"}
hang`)
	// Stop the turn once the fake has said it ignores SIGTERM (its start-up
	// time under load must not decide the test).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText && ev.Text == "stubborn" {
			cancel()
		}
	}
	res, err := Run(ctx, turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
	assert.Equal(t, "SIGKILL", res.Exit.Signal, "SIGTERM was ignored, so SIGKILL ended it")
}

func TestRunDeadline(t *testing.T) {
	turn := fakeTurn(t, `sleep 60s`)
	turn.Limits.Deadline = 500 * time.Millisecond
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err))
	assert.True(t, outposterr.IsRetryable(err))
	assert.Contains(t, err.Error(), "deadline")
}

func TestRunGrandchildHoldingStdout(t *testing.T) {
	marker := "outpost-grandchild-" + strings.ReplaceAll(t.Name(), "/", "-")
	_ = marker
	// The background sleep inherits stdout: the turn must end on the CLI's
	// own exit, not on the pipe closing, and the orphan must be killed.
	res, err := Run(context.Background(), fakeTurn(t, `spawn-sleep 97
emit {"type":"result","text":"ok"}
emit {"type":"finished","ok":true}`))
	require.NoError(t, err)
	assert.Less(t, res.Duration, 30*time.Second)
	assert.Eventually(t, func() bool { return !processRunning("sleep 97") }, 10*time.Second, 100*time.Millisecond,
		"the grandchild was killed with the process group")
}

func TestRunCancelKillsProcessGroup(t *testing.T) {
	turn := fakeTurn(t, `spawn-sleep 98
emit {"type":"text","text":"working"}
hang`)
	ctx, cancel := context.WithCancel(context.Background())
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText {
			cancel()
		}
	}
	_, err := Run(ctx, turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
	assert.Eventually(t, func() bool { return !processRunning("sleep 98") }, 10*time.Second, 100*time.Millisecond)
}

func TestRunOversizedLine(t *testing.T) {
	res, err := Run(context.Background(), fakeTurn(t, `big 17000000
emit {"type":"finished","ok":true}`))
	require.NoError(t, err)
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "longer than 16 MiB")
}

func TestRunPreflight(t *testing.T) {
	turn := fakeTurn(t, "x")
	turn.Input.Fork = true
	_, err := Run(context.Background(), turn)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))

	turn = fakeTurn(t, "")
	_, err = Run(context.Background(), turn)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))

	_, err = Run(context.Background(), Turn{})
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
}

func TestRunMissingBinaryIsSandboxError(t *testing.T) {
	turn := fakeTurn(t, "emit {}")
	turn.Adapter = fakecli.New("/nonexistent/outpost-fake")
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err))
	assert.False(t, res.Exited)
}

// processRunning reports whether a process whose command line contains s runs.
func processRunning(s string) bool {
	out, _ := exec.Command("ps", "-eo", "args").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, s) && !strings.Contains(l, "ps -eo") {
			return true
		}
	}
	return false
}

func TestRunStopsOnQuotaRetryChatter(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c-chatter"}
emit {"type":"quota","status":"rejected","reset":"2026-12-03T00:00:00Z"}
emit {"type":"retry","attempt":1,"status":429}
sleep 60s
emit {"type":"finished","ok":true}`)
	turn.StopOnQuotaRetry = true
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.True(t, outposterr.IsQuota(err), "%v", err)
	reset, ok := outposterr.ResetAt(err)
	require.True(t, ok)
	assert.Equal(t, "2026-12-03T00:00:00Z", reset.UTC().Format(time.RFC3339))
	assert.Less(t, res.Duration, 30*time.Second, "stopped early, not after the CLI's retries")
	assert.Equal(t, "c-chatter", res.Conversation)

	// Without the option the chatter is only recorded.
	turn = fakeTurn(t, `emit {"type":"retry","attempt":1,"status":503}
emit {"type":"finished","ok":true}`)
	turn.StopOnQuotaRetry = true
	_, err = Run(context.Background(), turn)
	require.NoError(t, err, "a retry that is not quota never stops the turn")
}

func TestRunBoundsTheAnswerText(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"text","text":"0123456789"}
emit {"type":"text","text":"abcdefghij"}
emit {"type":"text","text":"KLMNOPQRST"}
emit {"type":"finished","ok":true}`)
	turn.Limits.TextBytes = 25
	turn.Limits.KeptEvents = 2
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "0123456789\nabcdefghij\nKLM", res.Text, "joined pieces stop at the bound, newlines counted")
	assert.LessOrEqual(t, len(res.Text), 25)
	assert.True(t, res.TextTruncated)
	assert.Len(t, res.Events, 2)
	assert.Equal(t, 3, res.Counts[adapters.KindText], "every event is still counted")
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "answer text cut at 25 bytes")
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "events not kept")
}

func TestRunFinalTextWinsOverPieces(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"text","text":"0123456789"}
emit {"type":"text","text":"abcdefghij"}
emit {"type":"result","text":"short final"}
emit {"type":"finished","ok":true}`)
	turn.Limits.TextBytes = 12
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "short final", res.Text)
	assert.False(t, res.TextTruncated, "the final text fits: nothing is cut")
}

// panicky is an adapter whose decoder panics: a bug inside Outpost.
type panicky struct{ adapters.Adapter }

func (p panicky) NewDecoder() adapters.Decoder { return panicDecoder{} }

type panicDecoder struct{}

func (panicDecoder) Decode([]byte) []adapters.Event { panic("decoder bug") }

func TestRunReportsAPanicAsInternal(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"text","text":"x"}`)
	turn.Adapter = panicky{turn.Adapter}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	require.NotNil(t, res)
	assert.Equal(t, outposterr.Internal, outposterr.ClassOf(err), "a bug in Outpost is not the agent's process failure")
	assert.Contains(t, err.Error(), "decoder bug")
	assert.Equal(t, err, res.Err)
}

func TestValidateBeforeAnySandbox(t *testing.T) {
	turn := fakeTurn(t, "")
	turn.Provider = nil
	err := turn.Validate()
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "empty prompt")

	turn.Input.Prompt = "hi"
	assert.NoError(t, turn.Validate(), "a turn is valid without a sandbox: callers check before preparing one")
	turn.Input.Continue = "../etc"
	assert.ErrorContains(t, turn.Validate(), "invalid conversation id")
	turn.Input.Continue, turn.Input.Fork = "", true
	assert.ErrorContains(t, turn.Validate(), "fork needs the conversation")
}

// slowAcquire takes its time to make a lease, as a cold engine does.
type slowAcquire struct {
	sandbox.Provider
	delay time.Duration
}

func (p slowAcquire) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Provider.Acquire(ctx, spec)
}

// TestDeadlineBoundsTheWholeTurn: the turn's deadline counts from its
// start, not from when its CLI starts: a slow acquisition plus a CLI that
// would each fit in it alone make a turn past its deadline, a timeout.
func TestDeadlineBoundsTheWholeTurn(t *testing.T) {
	turn := fakeTurn(t, "sleep 1500ms\n"+`emit {"type":"result","text":"late"}`+"\n"+`emit {"type":"finished","ok":true}`)
	turn.Provider = slowAcquire{Provider: turn.Provider, delay: 1500 * time.Millisecond}
	turn.Limits.Deadline = 2 * time.Second
	res, err := Run(context.Background(), turn)
	require.Error(t, err, "%+v", res)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
}

// TestAcquisitionPastTheDeadlineIsATimeout: a lease that is not ready by
// the turn's deadline ends the turn as a timeout, as a seed or a CLI past
// it does, not as a sandbox failure.
func TestAcquisitionPastTheDeadlineIsATimeout(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Provider = slowAcquire{Provider: turn.Provider, delay: time.Hour}
	turn.Limits.Deadline = 100 * time.Millisecond
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "%v", err)
	assert.ErrorContains(t, err, "acquire sandbox: over the turn's deadline")
}

// deadlineProbe records the deadline its Acquire is bounded by.
type deadlineProbe struct {
	sandbox.Provider
	got *time.Time
}

func (p deadlineProbe) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	*p.got, _ = ctx.Deadline()
	return p.Provider.Acquire(ctx, spec)
}

// TestBeginStartsTheDeadline: a turn begun before Run (its caller copied
// its source first) keeps the deadline Begin set; Run does not count
// Limits.Deadline again from its own start.
func TestBeginStartsTheDeadline(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	var got time.Time
	turn.Provider = deadlineProbe{Provider: turn.Provider, got: &got}
	turn.Limits.Deadline = time.Hour
	deadline := turn.Begin()
	_, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.True(t, got.Equal(deadline), "acquisition bounded by %v, Begin said %v", got, deadline)

	turn.Provider = deadlineProbe{Provider: turn.Provider.(deadlineProbe).Provider, got: &got}
	before := time.Now()
	fresh := turn
	fresh.deadline = time.Time{}
	_, err = Run(context.Background(), fresh)
	require.NoError(t, err)
	assert.False(t, got.Before(before.Add(time.Hour)), "a turn not begun counts from Run: %v", got)
}

// TestTurnThatNeverRanCostsAKnownZero: a turn that fails before its CLI
// runs (here the lease cannot be acquired) spent nothing, known, so a sum
// over a job's attempts keeps its known cost.
func TestTurnThatNeverRanCostsAKnownZero(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Provider = failingProvider{}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	require.NotNil(t, res)
	assert.True(t, res.Usage.CostKnown, "%+v", res.Usage)
	assert.True(t, res.Usage.Complete)
	assert.Zero(t, res.Usage.Tokens())
	assert.Zero(t, res.Usage.CostUSD)
	known := usage.Usage{Input: 10, Output: 5, CostUSD: 0.25, Complete: true, CostKnown: true, CostSource: usage.CostSourceCLI}
	sum := res.Usage.Add(known)
	assert.True(t, sum.CostKnown)
	assert.Equal(t, usage.CostSourceCLI, sum.CostSource)
	assert.InDelta(t, 0.25, sum.CostUSD, 1e-12)
}
