// Package install carries out credential plans: it reads host credential
// files safely, writes them into a sandbox's private home, runs login
// commands there, and writes rotated logins back to the host.
//
// Rules it enforces:
//   - host files are read only when they are regular files, opened without
//     following symlinks, and at most [MaxFileBytes];
//   - in the sandbox, directories are 0700 and files 0600, written to a
//     staging directory through the tar copy and renamed into place, so no
//     secret ever appears in argv, an exec command line or a log;
//   - login commands get their secret on stdin or in the exec environment;
//   - an unisolated (host) sandbox receives variables only: never files or
//     logins, which would touch the user's own machine;
//   - a rotated login is written back only when the sandbox copy is valid
//     and newer, atomically, under a lock, so parallel turns write it once.
package install

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// MaxFileBytes bounds a host credential file.
const MaxFileBytes = 1 << 20

// DefaultLoginTimeout bounds one login command.
const DefaultLoginTimeout = 2 * time.Minute

// Options configure materialization.
type Options struct {
	// Agent names the CLI in messages.
	Agent string
	// HostHome is the host user's home directory (for file forms).
	HostHome string
	// Relocate holds the values of relocation variables
	// (CLAUDE_CONFIG_DIR, CODEX_HOME, …) as set for the caller.
	Relocate map[string]string
	// LoginTimeout bounds each login command (0: DefaultLoginTimeout).
	LoginTimeout time.Duration
	// ShareLogins allows an exclusive login (a single-use refresh token)
	// to be installed in several sandboxes at once.
	ShareLogins bool
}

// Rotating is a refreshable login installed in a sandbox.
type Rotating struct {
	HostPath    string
	SandboxPath string
	file        credentials.HostFile
}

// Installed is the result of [Materialize].
type Installed struct {
	// Env is the plan's variables, to add to the CLI's environment.
	Env map[string]string
	// Strip lists variables to remove from the CLI's environment.
	Strip []string
	// Rotating lists logins to consider for write-back after the turn.
	Rotating []Rotating
	// Secrets are the secrets of the credential files installed, as
	// installed ([credentials.FileSecrets]): what the harness removes from
	// the CLI's output beside its secret variables.
	Secrets []string
	// held are the in-use locks of exclusive logins, released by Close.
	held []*os.File
}

// Close releases the in-use locks of exclusive logins. Idempotent.
func (i *Installed) Close() {
	for _, f := range i.held {
		_ = f.Close() // closing the descriptor releases its flock
	}
	i.held = nil
}

// ReadHostFile reads a credential file: a regular file, not a symlink (it is
// opened without following links), at most MaxFileBytes. A missing file is
// a configuration error naming it and how to create it.
func ReadHostFile(p string, f credentials.HostFile, agent string) ([]byte, error) {
	st, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		msg := fmt.Sprintf("%s: credential file %s not found", agent, p)
		if f.Login != "" {
			msg += "; create it by logging in (" + f.Login + ")"
		}
		if f.Alternative != "" {
			msg += ", or use " + f.Alternative
		}
		msg += ". Only this file is read"
		return nil, outposterr.New(outposterr.Configuration, "%s", msg)
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s: credential file %s", agent, p)
	}
	if !st.Mode().IsRegular() {
		return nil, outposterr.New(outposterr.Configuration, "%s: credential file %s is not a regular file (symlinks are refused)", agent, p)
	}
	if st.Size() > MaxFileBytes {
		return nil, outposterr.New(outposterr.Configuration, "%s: credential file %s is larger than %d bytes", agent, p, MaxFileBytes)
	}
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s: open credential file %s", agent, p)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s: read credential file %s", agent, p)
	}
	if len(b) > MaxFileBytes {
		return nil, outposterr.New(outposterr.Configuration, "%s: credential file %s is larger than %d bytes", agent, p, MaxFileBytes)
	}
	return b, nil
}

// file is one file to place in the sandbox home.
type file struct {
	dest    string // relative to the home
	content []byte
}

// Materialize carries out plan (and config, if any) in sb. The caller must
// Close the result when the turn is over (it holds the in-use locks of
// exclusive logins).
func Materialize(ctx context.Context, sb sandbox.Sandbox, plan credentials.Plan, config credentials.ConfigPlan, opts Options) (*Installed, error) {
	inst := &Installed{Env: map[string]string{}, Strip: plan.Strip}
	if err := materialize(ctx, sb, plan, config, opts, inst); err != nil {
		inst.Close()
		return nil, err
	}
	return inst, nil
}

func materialize(ctx context.Context, sb sandbox.Sandbox, plan credentials.Plan, config credentials.ConfigPlan, opts Options, inst *Installed) error {
	agent := opts.Agent
	for k, v := range plan.Env {
		inst.Env[k] = v
	}
	unisolated := false
	if u, ok := sb.(sandbox.Unisolated); ok && u.Unisolated() {
		unisolated = true
	}
	var files []file
	for _, f := range plan.Files {
		if f.Dest == "" && f.DestVar == "" {
			return outposterr.New(outposterr.Configuration, "%s: credential file %s has no destination", agent, f.Path)
		}
		if f.Dest != "" && unisolated {
			return outposterr.New(outposterr.Configuration,
				"%s: the host sandbox receives credentials as variables only, not the file %s; use a variable form or the Docker sandbox", agent, f.Path)
		}
		if f.Dest != "" && !credentials.ValidDest(f.Dest) {
			return outposterr.New(outposterr.Configuration, "%s: unsafe credential destination %q", agent, f.Dest)
		}
		hostPath := f.HostPath(opts.HostHome, opts.Relocate[f.RelocateVar])
		content, err := ReadHostFile(hostPath, f, agent)
		if err != nil {
			return err
		}
		if f.Exclusive && !opts.ShareLogins {
			lock, err := holdExclusive(hostPath, agent)
			if err != nil {
				return err
			}
			inst.held = append(inst.held, lock)
		}
		if f.Project != nil {
			if content, err = f.Project(content); err != nil {
				return err
			}
		}
		if f.DestVar != "" {
			inst.Env[f.DestVar] = strings.TrimSpace(string(content))
			inst.Secrets = append(inst.Secrets, inst.Env[f.DestVar])
			continue
		}
		inst.Secrets = append(inst.Secrets, credentials.FileSecrets(content)...)
		files = append(files, file{dest: f.Dest, content: content})
		if f.Rotates {
			inst.Rotating = append(inst.Rotating, Rotating{HostPath: hostPath, SandboxPath: path.Join(sb.Home(), f.Dest), file: f})
		}
	}
	if unisolated {
		if len(config.Files) > 0 {
			return outposterr.New(outposterr.Configuration, "%s: the host sandbox takes no configuration files (%s); use the Docker sandbox", agent, config.Files[0].Dest)
		}
		if len(plan.Logins) > 0 {
			return outposterr.New(outposterr.Configuration, "%s: the host sandbox runs no login commands; use a variable form or the Docker sandbox", agent)
		}
		// Generated files and configuration are not credentials, but the
		// host sandbox receives variables only.
		return nil
	}
	for _, g := range plan.Generated {
		if !credentials.ValidDest(g.Dest) {
			return outposterr.New(outposterr.Configuration, "%s: unsafe destination %q", agent, g.Dest)
		}
		files = append(files, file{dest: g.Dest, content: g.Content})
	}
	for _, c := range config.Files {
		if !credentials.ValidDest(c.Dest) {
			return outposterr.New(outposterr.Configuration, "%s: unsafe config destination %q", agent, c.Dest)
		}
		existing, err := readSandboxFile(ctx, sb, path.Join(sb.Home(), c.Dest))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		merged, err := credentials.MergeJSON(existing, c.Section, c.Entries)
		if err != nil {
			return err
		}
		files = append(files, file{dest: c.Dest, content: merged})
	}
	if err := writeFiles(ctx, sb, files); err != nil {
		return err
	}
	for _, l := range plan.Logins {
		if err := runLogin(ctx, sb, l, inst.Env, opts); err != nil {
			return err
		}
	}
	return nil
}

// installScript moves staged files into place: $1 is the staging directory,
// then pairs of (staged name, destination).
const installScript = `set -e
stage=$1; shift
while [ $# -gt 1 ]; do
	src=$stage/$1; dst=$2; shift 2
	dir=$(dirname "$dst")
	[ -d "$dir" ] || mkdir -p -m 0700 "$dir"
	chmod 0600 "$src"
	mv -f "$src" "$dst"
done
rmdir "$stage"`

// writeFiles stages files through [WritePrivateDir] and renames them into
// place.
func writeFiles(ctx context.Context, sb sandbox.Sandbox, files []file) error {
	if len(files) == 0 {
		return nil
	}
	stage := path.Join(sb.Home(), ".outpost-install-"+randomHex())
	staged := make([]PrivateFile, len(files))
	args := []string{"sh", "-c", installScript, "outpost-install", stage}
	for i, f := range files {
		name := strconv.Itoa(i)
		staged[i] = PrivateFile{Name: name, Data: f.content}
		args = append(args, name, path.Join(sb.Home(), f.dest))
	}
	if err := WritePrivateDir(ctx, sb, stage, staged); err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "copy credentials into the sandbox")
	}
	out, st, err := run(ctx, sb, sandbox.Command{Args: args}, nil)
	if err != nil {
		return outposterr.Wrap(outposterr.Sandbox, err, "install credentials")
	}
	if !st.Success() {
		return outposterr.New(outposterr.Sandbox, "install credentials: %s: %s", st, strings.TrimSpace(out))
	}
	return nil
}

func runLogin(ctx context.Context, sb sandbox.Sandbox, l credentials.Login, env map[string]string, opts Options) error {
	timeout := opts.LoginTimeout
	if timeout <= 0 {
		timeout = DefaultLoginTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := sandbox.Command{Args: l.Args, Env: env}
	var secrets []string
	if l.StdinVar != "" {
		v, ok := env[l.StdinVar]
		if !ok {
			return outposterr.New(outposterr.Configuration, "%s: login needs %s", opts.Agent, l.StdinVar)
		}
		cmd.Stdin = []byte(v)
		secrets = append(secrets, v)
	}
	for _, v := range env {
		secrets = append(secrets, v)
	}
	out, st, err := run(lctx, sb, cmd, secrets)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "%s: login command %s", opts.Agent, l.Args[0])
	}
	if !st.Success() {
		return outposterr.New(outposterr.Configuration, "%s: login command %s failed (%s): %s", opts.Agent, l.Args[0], st, strings.TrimSpace(out))
	}
	return nil
}

// run executes cmd and returns its combined, redacted, bounded output.
func run(ctx context.Context, sb sandbox.Sandbox, cmd sandbox.Command, secrets []string) (string, sandbox.ExitStatus, error) {
	p, err := sb.Exec(ctx, cmd)
	if err != nil {
		return "", sandbox.ExitStatus{}, err
	}
	defer p.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, p.Stdout())
		close(done)
	}()
	_, _ = io.Copy(&limited{w: &out, n: 4096}, p.Stderr())
	st, err := p.Wait()
	<-done
	return Redact(out.String(), secrets...), st, err
}

// Redact replaces every occurrence of each non-trivial secret in s by
// "[REDACTED]", as the harness and the model gateway do: longest first, so
// a secret holding another value is replaced whole.
func Redact(s string, secrets ...string) string {
	secrets = slices.Clone(secrets)
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// readSandboxFile returns one file's content from the sandbox, or an error
// wrapping os.ErrNotExist.
func readSandboxFile(ctx context.Context, sb sandbox.Sandbox, p string) ([]byte, error) {
	rc, err := sb.CopyOut(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, os.ErrNotExist)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, os.ErrNotExist)
		}
		if h.Typeflag == tar.TypeReg && path.Base(h.Name) == path.Base(p) {
			return io.ReadAll(io.LimitReader(tr, MaxFileBytes))
		}
	}
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
