package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/internal/safetar"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// A pod cannot see the host's directories, so a workspace is copied: in at
// Acquire, and back after each process ends. The pod side marks each sync
// with a stamp file in its /tmp; the next sync sends the manifest of every
// path under Root plus the entries whose status changed since the stamp
// (ctime, which no program can set back). The host applies the changes and
// removes the paths it had learned from the pod that the manifest no longer
// lists. Paths created on the host during the lease are never touched.

// syncStamp is the pod-side stamp of the last sync.
const syncStamp = "/tmp/.outpost-sync"

// workspaceInScript extracts the host workspace into Root, then stamps it.
const workspaceInScript = `cd ` + Root + ` && tar -x -p --no-same-owner -f - && : >` + syncStamp + `.stamp`

// syncScript writes the sync archive: first the manifest (NUL-separated
// names of every file, directory and link under Root), then the entries
// changed since the last stamp, hard links stored as files. The stamp moves
// only once the host says on standard input that it applied the archive
// ("ok"): after a sync that failed half-way the next one sends again
// everything changed since the last one that succeeded.
const syncScript = `cd ` + Root + ` || exit 3
s=` + syncStamp + `
: >"$s.new" || exit 4
find . -mindepth 1 \( -type f -o -type d -o -type l \) -print0 >"$s.all" || exit 4
if [ -e "$s.stamp" ]; then find . -mindepth 1 -cnewer "$s.stamp" \( -type f -o -type d -o -type l \) -print0 >"$s.chg" || exit 4
else cp "$s.all" "$s.chg" || exit 4; fi
tar -c -f - --hard-dereference -C /tmp .outpost-sync.all -C ` + Root + ` --no-recursion --null -T "$s.chg" || exit
IFS= read -r a && [ "$a" = ok ] || exit 6
mv -f "$s.new" "$s.stamp" || exit 4`

// syncNamesScript writes a sync archive of the entries named on standard
// input (NUL-separated): those the manifest lists but that the host has
// never had and that the last archive left out. A directory renamed (or
// moved in) changes its own status, not its content's, so the entries
// beneath it are not "changed since the stamp".
const syncNamesScript = `cd ` + Root + ` || exit 3
find . -mindepth 1 \( -type f -o -type d -o -type l \) -print0 >` + syncStamp + `.all || exit 4
exec tar -c -f - --hard-dereference -C /tmp .outpost-sync.all -C ` + Root + ` --no-recursion --null -T -`

// manifestName is the first entry of a sync archive.
const manifestName = ".outpost-sync.all"

// maxManifest bounds the manifest of one sync.
const maxManifest = 64 << 20

// copyWorkspaceIn copies the host workspace into Root: directories, regular
// files and symbolic links (as they are), no special files.
func (l *lease) copyWorkspaceIn(ctx context.Context) error {
	pr, pw := io.Pipe()
	defer pr.Close()
	known := map[string]bool{}
	go func() { pw.CloseWithError(writeWorkspaceTar(pw, l.workspace, known, l.hide)) }()
	p, err := l.start(ctx, execSpec{args: []string{"sh", "-c", workspaceInScript}, dir: "/", stream: pr})
	if err != nil {
		return fmt.Errorf("copy workspace in: %w", err)
	}
	defer p.Close()
	stderr, done := leasekit.TailOf(p.Stderr(), 4096)
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	st, err := p.Wait()
	leasekit.AwaitOutput(done)
	if err != nil {
		return fmt.Errorf("copy workspace in: %w", err)
	}
	if !st.Success() {
		return outposterr.New(outposterr.Sandbox, "copy workspace in: tar %s: %s", st, bytes.TrimSpace(stderr.Bytes()))
	}
	l.syncMu.Lock()
	l.known = known
	l.syncMu.Unlock()
	return nil
}

// writeWorkspaceTar writes dir as a tar stream of relative names and records
// them in known. Symbolic links are not followed; the hidden directories
// are left out.
func writeWorkspaceTar(w io.Writer, dir string, known map[string]bool, hide []string) error {
	tw := tar.NewWriter(w)
	err := safetar.Tree{
		Dir: dir,
		Filter: func(name string, _ bool) (safetar.Pick, error) {
			if hidden(name, hide) {
				return safetar.Prune, nil
			}
			return safetar.Keep, nil
		},
		Edit:    func(h *tar.Header) { h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", "" },
		Written: func(name string) { known[name] = true },
	}.Write(context.Background(), tw)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "read workspace %s", dir)
	}
	return tw.Close()
}

// syncWorkspace brings the pod's workspace changes back to the host
// directory (see the comment at the top of this file). What the pod sends
// is hostile: names are checked, nothing is written through a link or
// outside the directory (os.Root), sizes are bounded, symbolic links that
// are absolute or leave the workspace are not recreated.
func (l *lease) syncWorkspace(ctx context.Context) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.goneError() != nil {
		return outposterr.Wrap(outposterr.Sandbox, l.goneError(), "sync workspace")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*l.p.opts.OpTimeout)
	defer cancel()
	ack := &syncAck{ch: make(chan struct{})}
	var missing []string
	err := l.syncExec(ctx, syncScript, ack, func(r io.Reader) error {
		var err error
		missing, err = l.applySyncMissing(&limitReader{r: r, n: l.p.opts.MaxSyncBytes})
		ack.give(err == nil)
		return err
	})
	ack.give(false)
	if err != nil || len(missing) == 0 {
		return err
	}
	var names bytes.Buffer
	for _, n := range missing {
		names.WriteString("./" + n + "\x00")
	}
	return l.syncExec(ctx, syncNamesScript, &names, func(r io.Reader) error {
		_, err := l.applySyncMissing(&limitReader{r: r, n: l.p.opts.MaxSyncBytes})
		return err
	})
}

// syncExec runs script in the pod with stdin and hands its standard
// output to apply (l.syncRunner instead, in tests).
func (l *lease) syncExec(ctx context.Context, script string, stdin io.Reader, apply func(io.Reader) error) error {
	if l.syncRunner != nil {
		return l.syncRunner(ctx, script, stdin, apply)
	}
	p, err := l.start(ctx, execSpec{args: []string{"sh", "-c", script}, dir: "/", stream: stdin})
	if err != nil {
		return fmt.Errorf("sync workspace: %w", err)
	}
	defer p.Close()
	stderr, errDone := leasekit.TailOf(p.Stderr(), 4096)
	applyErr := apply(p.Stdout())
	if applyErr != nil {
		_ = p.SignalGroup(context.WithoutCancel(ctx), syscall.SIGKILL, true, true)
	}
	st, err := p.Wait()
	leasekit.AwaitOutput(errDone)
	switch {
	case applyErr != nil:
		return applyErr
	case err != nil:
		return fmt.Errorf("sync workspace: %w", err)
	case !st.Success():
		return outposterr.New(outposterr.Sandbox, "sync workspace: %s: %s", st, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// syncAck is syncScript's standard input: it blocks until give, then
// yields "ok" when the archive was applied, else nothing.
type syncAck struct {
	ch   chan struct{}
	once sync.Once
	ok   bool
	sent bool
}

func (a *syncAck) give(ok bool) {
	a.once.Do(func() {
		a.ok = ok
		close(a.ch)
	})
}

func (a *syncAck) Read(b []byte) (int, error) {
	<-a.ch
	if !a.ok || a.sent {
		return 0, io.EOF
	}
	a.sent = true
	return copy(b, "ok\n"), nil
}

// limitReader fails once more than n bytes were read.
type limitReader struct {
	r io.Reader
	n int64
}

func (r *limitReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n -= int64(n)
	if r.n < 0 {
		return n, outposterr.New(outposterr.Sandbox, "sync workspace: the pod sent more than the limit (Options.MaxSyncBytes)")
	}
	return n, err
}

// applySync applies a sync archive to the host workspace.
func (l *lease) applySync(r io.Reader) error {
	_, err := l.applySyncMissing(r)
	return err
}

// applySyncMissing is applySync; it also returns the names the manifest
// lists that the host never had and the archive did not bring, which are
// then not learned as known (a later sync asks for them again).
func (l *lease) applySyncMissing(r io.Reader) ([]string, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil || h.Name != manifestName || h.Typeflag != tar.TypeReg || h.Size > maxManifest {
		return nil, outposterr.Wrap(outposterr.Sandbox, errors.Join(err, errors.New("no manifest")), "sync workspace")
	}
	raw, err := io.ReadAll(io.LimitReader(tr, maxManifest))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "sync workspace: read manifest")
	}
	now := map[string]bool{}
	for n := range bytes.SplitSeq(raw, []byte{0}) {
		if name, ok := syncName(string(n)); ok && !hidden(name, l.hide) {
			now[name] = true
		}
	}
	root, err := os.OpenRoot(l.workspace)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "sync workspace: open %s", l.workspace)
	}
	defer root.Close()
	type dirMode struct {
		name string
		mode fs.FileMode
		mt   time.Time
	}
	var dirs []dirMode
	got := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Sandbox, err, "sync workspace: read archive")
		}
		name, ok := syncName(h.Name)
		if !ok || hidden(name, l.hide) {
			l.p.log.Warn("workspace sync: entry refused", "name", h.Name)
			continue
		}
		got[name] = true
		// A pod's tar never holds an entry beneath a link (tar does not
		// follow links): one that does would land elsewhere than its name
		// says, a link perhaps outside the workspace.
		if link, ok := underLink(root, name); ok {
			return nil, syncErr(fmt.Errorf("%s is beneath the symbolic link %s", name, link), name)
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
				if err := root.RemoveAll(name); err != nil {
					return nil, syncErr(err, name)
				}
			}
			if err := root.MkdirAll(name, 0o700); err != nil {
				return nil, syncErr(err, name)
			}
			// Owner access while children are written; the mode is set at the end.
			if err := root.Chmod(name, mode|0o700); err != nil {
				return nil, syncErr(err, name)
			}
			dirs = append(dirs, dirMode{name, mode, h.ModTime})
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old-style regular files are still regular files
			if err := writeSyncFile(root, name, mode, h.ModTime, tr); err != nil {
				return nil, syncErr(err, name)
			}
		case tar.TypeSymlink:
			check := *h
			check.Name = name
			if err := leasekit.CheckEntry(&check); err != nil {
				l.p.log.Warn("workspace sync: link not recreated", "name", name, "reason", err)
				continue
			}
			if err := ensureParent(root, name); err != nil {
				return nil, syncErr(err, name)
			}
			if err := root.RemoveAll(name); err != nil {
				return nil, syncErr(err, name)
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return nil, syncErr(err, name)
			}
		default:
			l.p.log.Debug("workspace sync: entry type skipped", "name", name, "type", h.Typeflag)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		_ = root.Chmod(d.name, d.mode)
		_ = root.Chtimes(d.name, d.mt, d.mt)
	}
	for name := range l.known {
		if !now[name] {
			// Beneath a link (a directory the pod replaced by one), the
			// name went with the directory: removing it would follow the
			// link and remove another path.
			if _, ok := underLink(root, name); ok {
				continue
			}
			if err := root.RemoveAll(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.p.log.Debug("workspace sync: remove", "name", name, "err", err)
			}
		}
	}
	var missing []string
	for name := range now {
		if !l.known[name] && !got[name] {
			missing = append(missing, name)
			delete(now, name)
		}
	}
	slices.Sort(missing)
	l.known = now
	return missing, nil
}

func syncErr(err error, name string) error {
	return outposterr.Wrap(outposterr.Sandbox, err, "sync workspace: %s", name)
}

// syncName turns an archive name ("./a/b/") into a workspace path ("a/b"),
// refusing what [safetar.EntryName] refuses and the workspace itself.
func syncName(n string) (string, bool) {
	name, err := safetar.EntryName(n)
	if err != nil || name == "." {
		return "", false
	}
	return name, true
}

// underLink returns the first of name's parent directories that is a
// symbolic link in root.
func underLink(root *os.Root, name string) (string, bool) {
	var dirs []string
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		dirs = append(dirs, dir)
	}
	for _, dir := range slices.Backward(dirs) {
		fi, err := root.Lstat(dir)
		if err != nil {
			return "", false // missing: created as a directory
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return dir, true
		}
	}
	return "", false
}

// ensureParent creates the parent directories of name.
func ensureParent(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		return root.MkdirAll(dir, 0o755)
	}
	return nil
}

// writeSyncFile replaces name with the content of r: written to a new file
// beside it, then renamed over it (a link at name is replaced, not followed).
func writeSyncFile(root *os.Root, name string, mode fs.FileMode, mt time.Time, r io.Reader) error {
	if err := ensureParent(root, name); err != nil {
		return err
	}
	if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	}
	tmp := path.Join(path.Dir(name), ".outpost-sync-"+uuid.NewString()[:8])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = root.Chmod(tmp, mode)
	}
	if err == nil {
		_ = root.Chtimes(tmp, mt, mt)
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// hidden reports whether the workspace path name is, or is under, one of
// the hidden directories.
func hidden(name string, hide []string) bool {
	for _, h := range hide {
		if name == h || strings.HasPrefix(name, h+"/") {
			return true
		}
	}
	return false
}
