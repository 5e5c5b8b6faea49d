package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Seed is what a fresh lease's workspace starts from.
type Seed struct {
	// Tar returns the tar archive extracted into the lease's workspace root
	// (Sandbox.CopyIn, so remote engines work the same). The harness closes
	// it.
	Tar func(ctx context.Context) (io.ReadCloser, error)
	// Patch, when set, is applied in the workspace after the archive (git
	// apply --binary): the changes the job's earlier turns made, so a
	// continued conversation finds its work where it left it.
	Patch []byte
}

// PatchOptions ask for the patch of a turn's changes. The workspace must be
// a git repository (git must be in the sandbox) that holds Base.
type PatchOptions struct {
	// Base is the commit the workspace started from: the patch holds every
	// change against it, committed or not, tracked or new (files git
	// ignores excepted), deletions and binary files included.
	Base string
	// Exclude lists workspace-relative paths left out besides .outpost.
	Exclude []string
	// MaxBytes bounds the patch (0: DefaultMaxPatchBytes). A larger patch
	// is not kept: Result.Patch then has its size and files and Omitted set.
	MaxBytes int
}

// DefaultMaxPatchBytes bounds a collected patch.
const DefaultMaxPatchBytes = 64 << 20

// maxPatchFiles bounds the changed-file list of a patch.
const maxPatchFiles = 100000

// Patch is what a turn changed in its workspace.
type Patch struct {
	// Base is the commit the patch is against.
	Base string `json:"base"`
	// Diff is the patch (git diff --binary against the base); empty when
	// nothing changed or when Omitted.
	Diff []byte `json:"-"`
	// Bytes is the patch's size.
	Bytes int `json:"bytes"`
	// Files are the changed paths, relative to the workspace.
	Files []string `json:"files"`
	// Omitted says the patch was over PatchOptions.MaxBytes and not kept.
	Omitted bool `json:"omitted,omitempty"`
}

// workspaceTimeout bounds one workspace command (probe, git).
const workspaceTimeout = 2 * time.Minute

// configDir is never part of a patch.
const configDir = ".outpost"

// probeScript starts the CLI's command, after it has checked that the lease
// user can write the workspace: it creates and removes a file in the
// directory $1, and when it cannot, it writes one line on stderr, the
// [probeMarker] followed by the lease user and the directory's owner and
// mode, and exits [probeExit] without running the command; otherwise it
// replaces itself with the command ($2…). Without mktemp and rm on the
// lease's PATH the check is skipped. When the command is not
// there to run, it says so on a marker line ("missing=NAME") and exits
// [probeMissing]. Checking in the CLI's own exec costs the turn no exec of
// its own. Its arguments are the only input; nothing is interpolated.
const probeScript = `if command -v mktemp >/dev/null 2>&1 && command -v rm >/dev/null 2>&1; then
f=$(mktemp "$1/.outpost-write-probe.XXXXXX" 2>/dev/null) && rm -f -- "$f" || {
printf '\036outpost-probe\036user=%s:%s(%s)\036owner=%s\n' "$(id -u)" "$(id -g)" "$(id -un 2>/dev/null)" "$(stat -c '%u:%g(%U:%G) mode %a' -- "$1" 2>/dev/null)" >&2
exit 3; }
fi
shift
command -v "$1" >/dev/null 2>&1 || { printf '\036outpost-probe\036missing=%s\n' "$1" >&2; exit 127; }
exec "$@"`

// probeMarker starts the stderr line of a failed workspace probe; probeExit
// is its exit code, and probeMissing the code of a command not found.
const (
	probeMarker  = "\x1eoutpost-probe\x1e"
	probeExit    = 3
	probeMissing = 127
)

// probeCommand wraps the CLI's command in [probeScript] for the lease's
// workspace root. The shell is named by its path: the lease's PATH (the
// caller's, on the host) may not lead to it.
func probeCommand(cmd sandbox.Command, root string) sandbox.Command {
	cmd.Args = append([]string{"/bin/sh", "-c", probeScript, "outpost-probe", root}, cmd.Args...)
	return cmd
}

// prepareWorkspace seeds a fresh lease's workspace. That the lease user can
// write it is checked when the CLI starts ([probeScript]).
func prepareWorkspace(ctx context.Context, t Turn, sb sandbox.Sandbox) error {
	name := t.Adapter.Name()
	if t.Seed != nil {
		sctx, cancel := t.deadlineContext(ctx)
		err := seed(sctx, t, sb)
		expired := errors.Is(sctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			// Classified against the turn's own context: the seed's
			// context is always done by now (cancel), which would make
			// every refused source look like an interruption.
			if expired && ctx.Err() == nil {
				return outposterr.Wrap(outposterr.Timeout, err, "%s: seed workspace: over the turn's deadline", name)
			}
			return classifyInfra(ctx, name, outposterr.Sandbox, "seed workspace", err)
		}
	}
	return nil
}

func seed(ctx context.Context, t Turn, sb sandbox.Sandbox) error {
	if err := copyArchive(ctx, sb, t.Seed.Tar); err != nil {
		return err
	}
	if len(t.Seed.Patch) == 0 {
		return nil
	}
	if err := applyPatch(ctx, sb, t.Seed.Patch); err != nil {
		return fmt.Errorf("apply the earlier turns' patch: %w", err)
	}
	return nil
}

// copyArchive extracts the archive tarFn returns into the workspace root.
func copyArchive(ctx context.Context, sb sandbox.Sandbox, tarFn func(context.Context) (io.ReadCloser, error)) error {
	rc, err := tarFn(ctx)
	if err != nil {
		return err
	}
	err = sb.CopyIn(ctx, sb.Root(), rc)
	// The archive's own error (a file over the bounds, a special file)
	// says more than the extraction's broken pipe.
	if cerr := rc.Close(); err != nil && cerr != nil {
		err = cerr
	}
	return err
}

// applyPatch applies patch in the workspace (git apply --binary), from a
// scratch directory in the lease's home that is removed afterwards.
func applyPatch(ctx context.Context, sb sandbox.Sandbox, patch []byte) error {
	dir := newScratch(sb.Home())
	td, err := materializeTurnFiles(ctx, sb, dir, []adapters.TurnFile{{Name: "earlier.patch", Data: patch}})
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = td.Close(cctx)
		cancel()
	}()
	if err != nil {
		return err
	}
	_, _, err = runGit(ctx, sb, nil, 0, "apply", "--binary", "--whitespace=nowarn", "--", path.Join(dir, "earlier.patch"))
	return err
}

// unwritableError is the configuration error of a workspace the lease user
// cannot create files in; line is the failed probe's stderr line (after
// [probeMarker]).
func unwritableError(t Turn, sb sandbox.Sandbox, line string) error {
	var user, owner string
	for f := range strings.SplitSeq(line, "\x1e") {
		if v, ok := strings.CutPrefix(f, "user="); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(f, "owner="); ok {
			owner = v
		}
	}
	where := sb.Root()
	if t.Spec.Workspace != "" {
		where = t.Spec.Workspace + " (" + sb.Root() + " in the sandbox)"
	}
	if owner == "" {
		owner = "another user"
	}
	if user == "" {
		user = "the lease user"
	}
	return &outposterr.Error{Class: outposterr.Configuration, Details: outposterr.Details{Agent: t.Adapter.Name()},
		Message: fmt.Sprintf("%s: workspace %s is owned by %s and the lease user %s cannot create files in it: "+
			"run the lease as its owner (--user UID:GID), make it writable for %s, "+
			"or let Outpost work on a copy it owns (a job \"source\": {\"dir\": …} or {\"repo\": …, \"commit\": …})",
			t.Adapter.Name(), where, owner, user, user)}
}

// collectPatch stores the patch of the workspace's changes against
// opts.Base in res, computed by git inside the lease with a private index
// (the agent's own index and history stay as they are), with each secret
// of the turn's lease overwritten by a mask of its own length (in text;
// a binary file's base85 is not read). A failure is a warning: the turn's
// verdict stands.
func collectPatch(ctx context.Context, t Turn, sb sandbox.Sandbox, res *Result) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workspaceTimeout)
	defer cancel()
	p, err := diff(cctx, sb, *t.Patch)
	if err != nil {
		res.Warnings = append(res.Warnings, "collect the patch: "+err.Error())
		return
	}
	if res.redact.maskInPlace(p.Diff) {
		// Predictions are published: a key the agent wrote into a file
		// must not travel with its patch.
		res.SecretPrinted = true
		res.Warnings = append(res.Warnings, "the workspace's changes hold a secret the lease holds; it is masked in the patch")
	}
	res.Patch = p
}

func diff(ctx context.Context, sb sandbox.Sandbox, opts PatchOptions) (*Patch, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxPatchBytes
	}
	if !validRev(opts.Base) {
		return nil, fmt.Errorf("base %q is not a commit id", opts.Base)
	}
	spec := []string{"--", ".", ":(exclude)" + configDir}
	for _, x := range opts.Exclude {
		x = path.Clean(x)
		if x == "." || strings.HasPrefix(x, "/") || strings.HasPrefix(x, "..") || strings.ContainsAny(x, "\x00\n") {
			return nil, fmt.Errorf("exclude %q is not a workspace-relative path", x)
		}
		spec = append(spec, ":(exclude,literal)"+x)
	}
	index := path.Join(sb.Home(), ".outpost-patch-index-"+path.Base(newScratch("")))
	env := map[string]string{"GIT_INDEX_FILE": index}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = removeInSandbox(cctx, sb, index)
		cancel()
	}()
	if _, _, err := runGit(ctx, sb, env, 0, "read-tree", opts.Base); err != nil {
		return nil, err
	}
	if _, _, err := runGit(ctx, sb, env, 0, append([]string{"add", "-A"}, spec...)...); err != nil {
		return nil, err
	}
	names, over, err := runGit(ctx, sb, env, 64<<20, "diff", "--cached", "--name-only", "-z", "--no-renames", opts.Base)
	if err != nil {
		return nil, err
	}
	if over {
		return nil, fmt.Errorf("the changed-file list is over 64 MiB")
	}
	p := &Patch{Base: opts.Base, Files: []string{}}
	for _, f := range strings.Split(string(names), "\x00") {
		if f != "" && len(p.Files) < maxPatchFiles {
			p.Files = append(p.Files, f)
		}
	}
	if len(p.Files) == 0 {
		return p, nil
	}
	d, over, err := runGit(ctx, sb, env, opts.MaxBytes, "diff", "--cached", "--binary", "--full-index", "--no-renames",
		"--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", opts.Base)
	if err != nil {
		return nil, err
	}
	p.Bytes = len(d)
	if over {
		p.Omitted = true
		return p, nil
	}
	p.Diff = d
	return p, nil
}

// validRev accepts a full or abbreviated hexadecimal commit id.
func validRev(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// gitConfig keeps git inside the lease from running anything the
// workspace's own configuration names (hooks, fsmonitor, external diffs)
// and from refusing a workspace another uid owns.
var gitConfig = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
	"-c", "core.quotePath=false", "-c", "diff.noprefix=false", "-c", "core.autocrlf=false"}

// runGit runs git in the lease's workspace and returns its output, at
// most max bytes (0: discarded); over says there was more.
func runGit(ctx context.Context, sb sandbox.Sandbox, env map[string]string, max int, args ...string) ([]byte, bool, error) {
	cmd := sandbox.Command{Args: append(append([]string{"git"}, gitConfig...), args...), Env: env, Dir: sb.Root()}
	out, stderr, st, err := execCapture(ctx, sb, cmd, max)
	if err != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], gitNotRunError{err})
	}
	if !st.Success() {
		err := fmt.Errorf("%s: %s", st, strings.TrimSpace(stderr))
		if st.Code == 126 || st.Code == 127 || st.Signal != "" || st.OOMKilled {
			// Not executable, not found, killed: git did not get to refuse.
			err = gitNotRunError{err}
		}
		return nil, false, fmt.Errorf("git %s: %w", args[0], err)
	}
	return out, max > 0 && len(out) > max, nil
}

// gitNotRunError is a git that could not run in the sandbox (not there, not
// executable, killed), as opposed to one that ran and refused.
type gitNotRunError struct{ err error }

func (e gitNotRunError) Error() string { return e.err.Error() }
func (e gitNotRunError) Unwrap() error { return e.err }

// execCapture runs cmd and returns up to max+1 bytes of its stdout, the
// last 2 KiB of its stderr and its exit status. ctx bounds it all: when it
// ends the process is closed (killed) and ctx's error returned.
func execCapture(ctx context.Context, sb sandbox.Sandbox, cmd sandbox.Command, max int) ([]byte, string, sandbox.ExitStatus, error) {
	p, err := sb.Exec(ctx, cmd)
	if err != nil {
		return nil, "", sandbox.ExitStatus{}, err
	}
	defer p.Close()
	type done struct {
		out    []byte
		stderr string
		st     sandbox.ExitStatus
		err    error
	}
	ch := make(chan done, 1)
	go func() {
		errCh := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(p.Stderr(), 64<<10))
			_, _ = io.Copy(io.Discard, p.Stderr())
			if len(b) > 2<<10 {
				b = b[len(b)-2<<10:]
			}
			errCh <- string(b)
		}()
		var out bytes.Buffer
		_, _ = io.Copy(&out, io.LimitReader(p.Stdout(), int64(max)+1))
		_, _ = io.Copy(io.Discard, p.Stdout())
		st, err := p.Wait()
		ch <- done{out.Bytes(), <-errCh, st, err}
	}()
	select {
	case d := <-ch:
		return d.out, d.stderr, d.st, d.err
	case <-ctx.Done():
		_ = p.Close()
		return nil, "", sandbox.ExitStatus{}, ctx.Err()
	}
}
