package leasekit

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

func TestStatusOf(t *testing.T) {
	assert.Equal(t, sandbox.ExitStatus{Code: 0}, StatusOf(0))
	assert.Equal(t, sandbox.ExitStatus{Code: 3}, StatusOf(3))
	assert.Equal(t, sandbox.ExitStatus{Code: 128}, StatusOf(128))
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGKILL"}, StatusOf(137))
	assert.Equal(t, sandbox.ExitStatus{Code: -1, Signal: "SIGTERM"}, StatusOf(143))
	assert.Equal(t, sandbox.ExitStatus{Code: 200}, StatusOf(200))
}

func TestWorkDir(t *testing.T) {
	assert.Equal(t, "/workspace", WorkDir("/workspace", ""))
	assert.Equal(t, "/workspace/sub/dir", WorkDir("/workspace", "sub/dir"))
	assert.Equal(t, "/tmp", WorkDir("/workspace", "/tmp"))
}

// sent records the signal scripts a Proc runs.
type sent struct {
	mu   sync.Mutex
	argv [][]string
	err  error
}

func (s *sent) send(_ context.Context, argv []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.argv = append(s.argv, argv)
	return s.err
}

// TestProcSignal: every signal that ends a process leaves the cancellation
// marker (so a command not started yet never starts), others do not; the
// script gets the group's pid base and the signal's name.
func TestProcSignal(t *testing.T) {
	var s sent
	p := NewProc("/tmp/outpost-x", "SCRIPT", s.send)
	require.NoError(t, p.Signal(0))
	assert.Empty(t, s.argv, "signal 0 sends nothing")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1} {
		require.NoError(t, p.Signal(sig))
	}
	want := [][]string{
		{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "TERM", "1", "0"},
		{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "INT", "1", "0"},
		{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "HUP", "1", "0"},
		{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "QUIT", "1", "0"},
		{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "USR1", "0", "0"},
	}
	assert.Equal(t, want, s.argv)
	assert.False(t, p.Killed())
	require.NoError(t, p.Signal(syscall.SIGKILL))
	assert.True(t, p.Killed(), "a SIGKILL Outpost sent is remembered")

	err := p.Signal(syscall.Signal(200))
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "an unknown signal is the caller's mistake: %v", err)
}

// TestProcCloseWith: Close kills the leftovers only when asked to, runs the
// kind's release, unblocks readers and does it all once.
func TestProcCloseWith(t *testing.T) {
	s := sent{err: errors.New("engine down")}
	p := NewProc("/tmp/outpost-y", "SCRIPT", s.send)
	_, _ = p.Out().Write([]byte("unread"))
	released := 0
	closeP := func(leftovers bool) error {
		return p.CloseWith(func() bool { return leftovers }, func() { released++ })
	}
	require.ErrorContains(t, closeP(true), "engine down")
	require.ErrorContains(t, closeP(false), "engine down", "the first Close's error stays")
	assert.Equal(t, 1, released)
	require.Len(t, s.argv, 1)
	assert.Equal(t, []string{"KILL", "1", "1"}, s.argv[0][5:], "the group is killed, marked and cleaned")
	assert.True(t, IsClosed(p.Closing()))
	n, err := p.Stdout().Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF)

	// Nothing left over: no kill.
	var s2 sent
	p = NewProc("/tmp/outpost-z", "SCRIPT", s2.send)
	require.NoError(t, p.CloseWith(func() bool { return false }, func() {}))
	assert.Empty(t, s2.argv)
}

// TestProcWait: Wait returns the last status set once Finish ran.
func TestProcWait(t *testing.T) {
	p := NewProc("b", "s", (&sent{}).send)
	assert.False(t, IsClosed(p.Done()))
	p.SetExit(sandbox.ExitStatus{Code: 1}, nil)
	p.SetExit(sandbox.ExitStatus{Code: 2}, nil)
	p.Finish()
	st, err := p.Wait()
	require.NoError(t, err)
	assert.Equal(t, 2, st.Code)
	assert.Nil(t, p.Stdin(), "no live stdin unless set")
}

// TestExec: a command Validate refuses is a configuration error and is not
// started; a failed start is a nil Process, not a nil *fakeTar in an
// interface; a started one is returned as is.
func TestExec(t *testing.T) {
	var started *fakeTar
	start := func() (*fakeTar, error) {
		_, err := startFake(false, &started)(context.Background(), nil, nil)
		return started, err
	}
	p, err := Exec(sandbox.Command{Args: []string{""}}, start)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.True(t, p == nil)
	assert.Nil(t, started, "an invalid command is not started")

	p, err = Exec(sandbox.Command{Args: []string{"true"}, Env: map[string]string{"A=B": "x"}}, start)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.True(t, p == nil)
	assert.Nil(t, started, "an invalid command is not started")

	boom := errors.New("boom")
	p, err = Exec(sandbox.Command{Args: []string{"true"}}, func() (*fakeTar, error) { return nil, boom })
	assert.ErrorIs(t, err, boom)
	assert.True(t, p == nil, "a failed start is a nil Process, got %#v", p)

	p, err = Exec(sandbox.Command{Args: []string{"true"}}, start)
	require.NoError(t, err)
	require.NotNil(t, started)
	assert.Same(t, started, p)
	require.NoError(t, p.Close())
}

// TestProcGiveUpAfter: a done context kills the group (marked, so a
// command not started yet never starts) and the wait is given up a timeout
// later; Close starts the same timeout without a kill; a final status
// stops both.
func TestProcGiveUpAfter(t *testing.T) {
	s := &sent{err: errors.New("engine gone")}
	p := NewProc("/tmp/outpost-x", "SCRIPT", s.send)
	ctx, cancel := context.WithCancel(context.Background())
	var logged []error
	giveUp := p.GiveUpAfter(ctx, time.Millisecond, func(err error) { logged = append(logged, err) })
	cancel()
	<-giveUp
	s.mu.Lock()
	assert.Equal(t, [][]string{{"sh", "-c", "SCRIPT", "outpost-signal", "/tmp/outpost-x", "KILL", "1", "0"}}, s.argv)
	s.mu.Unlock()
	assert.Equal(t, []error{s.err}, logged, "the kill's error is logged")
	assert.True(t, p.Killed())

	s = &sent{}
	p = NewProc("/tmp/outpost-y", "SCRIPT", s.send)
	giveUp = p.GiveUpAfter(context.Background(), time.Millisecond, func(error) { t.Error("no kill to log") })
	require.NoError(t, p.CloseWith(func() bool { return false }, func() {}))
	<-giveUp
	assert.Empty(t, s.argv, "Close alone kills nothing here")

	p = NewProc("/tmp/outpost-z", "SCRIPT", s.send)
	ctx, cancel = context.WithCancel(context.Background())
	giveUp = p.GiveUpAfter(ctx, time.Millisecond, func(error) {})
	p.Finish()
	cancel()
	select {
	case <-giveUp:
		t.Fatal("a final status is not given up")
	case <-time.After(50 * time.Millisecond):
	}
	assert.Empty(t, s.argv)
}
