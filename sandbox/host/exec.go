package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// closeWait bounds how long Close waits for the killed process to be reaped.
const closeWait = 10 * time.Second

// Exec starts cmd in its own session and process group. Its environment is
// Options.Env, then HOME (the lease's home) and PWD (its directory), then
// Spec.Env, then cmd.Env. Args[0] is looked up on the PATH of that
// environment, never the provider's own. cmd.Dir defaults to Root; a
// relative Dir is taken relative to Root.
//
// When ctx is done the whole process group is killed (SIGKILL), also after
// the command's own process exited, until the Process is closed.
func (l *lease) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	if err := cmd.Validate(); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "invalid command")
	}
	if err := l.checkLive("exec"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd.Args[0], err)
	}
	dir := cmd.Dir
	switch {
	case dir == "":
		dir = l.root
	case !filepath.IsAbs(dir):
		dir = filepath.Join(l.root, dir)
	}
	env := mergeEnv(l.opts.Env, map[string]string{"HOME": l.home, "PWD": dir}, l.specEnv, cmd.Env)
	path, err := lookPath(cmd.Args[0], env["PATH"], dir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "exec")
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLiveLocked("exec"); err != nil {
		return nil, err
	}
	p, err := start(path, cmd, dir, envList(env))
	if err != nil {
		return nil, err
	}
	p.lease = l
	l.running[p] = struct{}{}
	go p.watch(ctx)
	l.log.Debug("exec", "pid", p.pid, "cmd", cmd.Redacted())
	return p, nil
}

// process is a started command.
type process struct {
	cmd    *exec.Cmd
	pid    int
	lease  *lease
	stdout *pipeReader
	stderr *pipeReader
	stdin  io.WriteCloser // non-nil only with KeepStdinOpen
	inFile *os.File       // our end of the stdin pipe, if any

	done   chan struct{} // closed when the command's own process was reaped
	status sandbox.ExitStatus
	err    error

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

var _ sandbox.Process = (*process)(nil)

// start launches the process. On failure every file it opened is closed.
func start(path string, c sandbox.Command, dir string, env []string) (p *process, err error) {
	var files []*os.File // closed on failure
	defer func() {
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}

	outR, outW, err := pipe()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "create stdout pipe")
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "create stderr pipe")
	}
	// Stdout and Stderr are *os.File, so exec.Cmd hands the write ends to the
	// child directly and starts no copying goroutine: Wait returns when the
	// process exits, even if a grandchild keeps the pipes open.
	ec := &exec.Cmd{
		Path:        path,
		Args:        append([]string(nil), c.Args...),
		Env:         env,
		Dir:         dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: sysProcAttr(),
	}
	var inR, inW *os.File
	if len(c.Stdin) > 0 || c.KeepStdinOpen {
		if inR, inW, err = pipe(); err != nil {
			return nil, outposterr.Wrap(outposterr.Sandbox, err, "create stdin pipe")
		}
		ec.Stdin = inR
	}
	if err := ec.Start(); err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "start %s", c.Args[0])
	}
	// The child has its copies; ours would keep the readers from reaching EOF.
	_ = outW.Close()
	_ = errW.Close()
	if inR != nil {
		_ = inR.Close()
	}

	p = &process{
		cmd:    ec,
		pid:    ec.Process.Pid,
		stdout: &pipeReader{f: outR},
		stderr: &pipeReader{f: errR},
		inFile: inW,
		done:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	if inW != nil {
		// Write the initial input in the background: the process may not read
		// it before it fills the pipe. Live writes wait for it.
		written := make(chan struct{})
		go func() {
			defer close(written)
			if len(c.Stdin) > 0 {
				_, _ = inW.Write(c.Stdin)
			}
			if !c.KeepStdinOpen {
				_ = inW.Close()
			}
		}()
		if c.KeepStdinOpen {
			p.stdin = &stdinWriter{f: inW, written: written}
		}
	}
	go p.reap()
	return p, nil
}

// reap waits for the command's own process and records its status.
func (p *process) reap() {
	err := p.cmd.Wait()
	if ps := p.cmd.ProcessState; ps != nil {
		p.status = exitStatus(ps)
	} else {
		p.err = outposterr.Wrap(outposterr.Sandbox, err, "wait for process %d", p.pid)
	}
	close(p.done)
}

// watch kills the process group when ctx is done, until the process is closed.
func (p *process) watch(ctx context.Context) {
	select {
	case <-ctx.Done():
		_ = killGroup(p.pid, syscall.SIGKILL)
	case <-p.closed:
	}
}

func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// Stdin returns the live input writer, or nil without KeepStdinOpen.
func (p *process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// Wait returns the exit status of the command's own process. It does not
// wait for the output pipes. The result is cached.
func (p *process) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// Signal sends sig to the whole process group. A group that no longer
// exists, or a closed process, is not an error.
func (p *process) Signal(sig syscall.Signal) error {
	select {
	case <-p.closed:
		return nil // the group was killed; its id may since have been reused
	default:
	}
	if err := killGroup(p.pid, sig); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "signal process group %d", p.pid)
	}
	return nil
}

// Close kills what is left of the process group, closes stdin and unblocks
// the output readers (they return io.EOF). It waits a bounded time for the
// command's own process to be reaped. Idempotent.
func (p *process) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	return p.closeCtx(ctx)
}

func (p *process) closeCtx(ctx context.Context) error {
	p.closeOnce.Do(func() {
		close(p.closed)
		var errs []error
		if err := killGroup(p.pid, syscall.SIGKILL); err != nil {
			errs = append(errs, outposterr.Wrap(outposterr.Sandbox, err, "kill process group %d", p.pid))
		}
		if p.inFile != nil {
			_ = p.inFile.Close() // may already be closed by the caller or the writer
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			errs = append(errs, outposterr.New(outposterr.Sandbox, "process %d did not exit after SIGKILL", p.pid))
		}
		_ = p.stdout.f.Close()
		_ = p.stderr.f.Close()
		if p.lease != nil {
			p.lease.forget(p)
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// pipeReader is the read end of an output pipe. Reads after Close, or
// interrupted by it, report io.EOF as the contract asks.
type pipeReader struct{ f *os.File }

func (r *pipeReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if errors.Is(err, os.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	return n, err
}

// stdinWriter is the live stdin of a KeepStdinOpen process. Writes wait until
// the initial Command.Stdin was written.
type stdinWriter struct {
	f       *os.File
	written <-chan struct{}
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	<-w.written
	return w.f.Write(b)
}

func (w *stdinWriter) Close() error {
	<-w.written
	err := w.f.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// lookPath finds name like a shell would with the given PATH value: a name
// with a slash is used as is (relative to dir), otherwise the first
// executable regular file in an absolute PATH entry. Relative and empty PATH
// entries are skipped, as os/exec does for security (exec.ErrDot).
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", &exec.Error{Name: name, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: %w", p, os.ErrPermission)
	}
	return nil
}

// envList renders env as sorted NAME=value pairs.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
