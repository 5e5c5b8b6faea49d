package install

import (
	"bytes"
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// WriteBack copies each rotated login from sb back to its host file when the
// sandbox copy is valid and newer than the host's (the plan's Fresher
// decides), merged into the host file (the plan's Merge), atomically (temp
// file, fsync, rename, mode 0600) and under an exclusive lock on a sibling
// lock file, re-checking freshness under the lock so concurrent turns that
// refreshed the same login write it once. It returns how many files it wrote.
func WriteBack(ctx context.Context, sb sandbox.Sandbox, rot []Rotating) (int, error) {
	written := 0
	var errs []error
	for _, r := range rot {
		sbContent, err := readSandboxFile(ctx, sb, r.SandboxPath)
		if err != nil {
			continue // the CLI removed it: nothing to write back
		}
		ok, err := writeBackOne(r, sbContent)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			written++
		}
	}
	return written, errors.Join(errs...)
}

func writeBackOne(r Rotating, sbContent []byte) (bool, error) {
	if r.file.Fresher == nil {
		return false, nil
	}
	lock, err := os.OpenFile(r.HostPath+".outpost-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, outposterr.Wrap(outposterr.Configuration, err, "lock %s", r.HostPath)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return false, outposterr.Wrap(outposterr.Configuration, err, "lock %s", r.HostPath)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing releases it too

	host, err := ReadHostFile(r.HostPath, r.file, "write-back")
	if err != nil {
		host = nil // a vanished host file is recreated
	}
	if !r.file.Fresher(host, sbContent) {
		return false, nil
	}
	out := sbContent
	if r.file.Merge != nil {
		if out, err = r.file.Merge(host, sbContent); err != nil {
			return false, err
		}
	}
	if bytes.Equal(out, host) {
		return false, nil
	}
	return true, writeAtomic(r.HostPath, out)
}

// writeAtomic replaces p with content (temp file, fsync, rename, 0600).
func writeAtomic(p string, content []byte) error {
	if err := atomicfile.Write(p, content, 0o600); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "write back %s", p)
	}
	return nil
}

// holdExclusive takes the in-use lock of an exclusive login without
// waiting: another sandbox (of this or another process) holding it means
// the login would be fanned out, which is refused.
func holdExclusive(hostPath, agent string) (*os.File, error) {
	f, err := os.OpenFile(hostPath+".outpost-inuse", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s: lock %s", agent, hostPath)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, outposterr.New(outposterr.Configuration,
				"%s: the login in %s is in use by another sandbox; its refresh token is single-use, so sharing it would log one of them out (run turns one at a time, use an API key, or opt in to sharing)", agent, hostPath)
		}
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s: lock %s", agent, hostPath)
	}
	return f, nil
}
