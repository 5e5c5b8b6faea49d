package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// CopyInProvider wraps p so every lease it hands out has the verified CLI
// e copied in (through [sandbox.Sandbox.CopyIn], so it works with engines
// that cannot see this machine's cache: a remote Docker engine, a
// Kubernetes pod) and its version checked before use. Commands run in such
// a lease find the CLI first on their PATH; basePath is the rest of that
// PATH (the image's). dir is where the tree goes (created first; empty:
// under the lease's home, which is memory-backed on some engines — a pod's
// home counts against its memory limit, so a disk path such as
// /tmp/outpost-cli is better there). A lease whose copy fails is released
// and the error is a bootstrap error. A lease whose image bakes the CLI in
// at its mount path (WriteBakeContext) is checked and gets no copy.
func (b *Bootstrapper) CopyInProvider(p sandbox.Provider, e *Entry, basePath, dir string) sandbox.Provider {
	return &copyInProvider{inner: p, b: b, e: e, base: basePath, dir: dir}
}

// releaseTimeout bounds releasing a lease whose copy failed.
const releaseTimeout = 30 * time.Second

type copyInProvider struct {
	inner sandbox.Provider
	b     *Bootstrapper
	e     *Entry
	base  string
	dir   string
}

func (p *copyInProvider) Name() string { return p.inner.Name() }

// Unwrap returns the provider whose leases get the CLI.
func (p *copyInProvider) Unwrap() sandbox.Provider { return p.inner }

func (p *copyInProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.inner.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	// An image that bakes the CLI in (WriteBakeContext) holds it where a
	// mount would put it: checked, it needs no copy.
	bin := p.e.SandboxBin()
	if _, berr := checkVersion(ctx, sb, p.e.Name, bin, p.e.Version, p.e.VersionLine); berr != nil {
		err = ctx.Err()
		dir := p.dir
		if dir != "" && err == nil {
			dir = path.Join(dir, p.e.Name, p.e.Version)
			err = mkdirIn(ctx, sb, dir)
		}
		if err == nil {
			bin, err = p.b.installIn(ctx, sb, p.e, dir, false)
		}
	}
	if err != nil {
		if reason := sandbox.GoneReason(ctx, sb); reason != "" && ctx.Err() == nil {
			// The lease went away under the copy: not the CLI's fault, and
			// worth a new lease.
			err = &outposterr.Error{Class: outposterr.Sandbox, Details: outposterr.Details{Retryable: true}, Cause: err,
				Message: fmt.Sprintf("the sandbox disappeared while %s %s was installed: %s", p.e.Name, p.e.Version, reason)}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		return nil, errors.Join(err, sb.Release(rctx))
	}
	base := p.base
	if v, ok := spec.Env["PATH"]; ok && v != "" {
		base = v
	}
	return &pathLease{Sandbox: sb, path: path.Dir(bin) + ":" + base}, nil
}

// pathLease is a lease whose commands get PATH unless they set their own.
type pathLease struct {
	sandbox.Sandbox
	path string
}

func (l *pathLease) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	if _, ok := cmd.Env["PATH"]; !ok {
		env := make(map[string]string, len(cmd.Env)+1)
		for k, v := range cmd.Env {
			env[k] = v
		}
		env["PATH"] = l.path
		cmd.Env = env
	}
	return l.Sandbox.Exec(ctx, cmd)
}

// Unwrap returns the lease the CLI was copied into.
func (l *pathLease) Unwrap() sandbox.Sandbox { return l.Sandbox }

// Unisolated passes the wrapped lease's answer on.
func (l *pathLease) Unisolated() bool {
	u, ok := l.Sandbox.(sandbox.Unisolated)
	return ok && u.Unisolated()
}

// mkdirIn creates dir (and its parents) in the lease.
func mkdirIn(ctx context.Context, sb sandbox.Sandbox, dir string) error {
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"mkdir", "-p", "--", dir}})
	if err != nil {
		return outposterr.Wrap(outposterr.Bootstrap, err, "create %s in the sandbox", dir)
	}
	defer proc.Close()
	go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	st, err := proc.Wait()
	if err == nil && !st.Success() {
		err = fmt.Errorf("mkdir %s", st)
	}
	if err != nil {
		return outposterr.Wrap(outposterr.Bootstrap, err, "create %s in the sandbox", dir)
	}
	return nil
}
