package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Progress reports a download. Total is -1 when the size is not known in
// advance. Phase is "download" while bytes arrive, then "verify" and
// "extract", and "done" once the entry is in the cache.
type Progress struct {
	Name     string
	Version  string
	Platform Platform
	Phase    string
	Done     int64
	Total    int64
}

// defaultHTTPClient has bounded connection, TLS and header timeouts and no
// overall timeout (a large download is bounded by Options.DownloadTimeout
// and the stall timeout instead). It uses no proxy: the library reads no
// environment, so a program that honours HTTPS_PROXY passes its own client.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       60 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   4,
	}}
}

// download is one archive to fetch.
type download struct {
	row      Row
	src      Source
	platform Platform
	pin      Integrity
}

// mirrorNames are the file names the download may have in a mirror
// directory: the URL's base name, and for npm packages also the name
// `npm pack` gives it ("anthropic-ai-claude-code-linux-x64-2.1.328.tgz").
func (d download) mirrorNames() []string {
	if d.src.Package == "" {
		u, err := url.Parse(d.src.URL)
		if err != nil {
			return nil
		}
		return []string{path.Base(u.Path)}
	}
	v := d.src.NPMVersion(d.row.Version)
	pkg := d.src.Package
	name := pkg[strings.LastIndexByte(pkg, '/')+1:]
	packed := strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-") + "-" + v + ".tgz"
	return []string{name + "-" + v + ".tgz", packed}
}

// fetch writes the download into a new temporary file under dir, hashing it
// on the way, and returns the file's path and source once the digest
// matched the pin. On any failure nothing is left behind.
func (b *Bootstrapper) fetch(ctx context.Context, d download, dir string) (file, source string, size int64, err error) {
	f, err := os.CreateTemp(dir, "download-*.part")
	if err != nil {
		return "", "", 0, outposterr.Wrap(outposterr.Bootstrap, err, "create download file")
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := newHash()
	source, size, err = b.copySource(ctx, d, io.MultiWriter(f, h))
	if err != nil {
		return "", "", 0, err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return "", "", 0, outposterr.Wrap(outposterr.Bootstrap, err, "write download file")
	}
	b.progress(d, "verify", size, size)
	if got := sumOf(h); !got.Equal(d.pin) {
		return "", "", 0, outposterr.Wrap(outposterr.Bootstrap, ErrIntegrity,
			"%s %s (%s) from %s: expected %s, got %s; nothing was installed",
			d.row.Name, d.row.Version, d.platform, source, d.pin, got)
	}
	return f.Name(), source, size, nil
}

// ErrIntegrity is wrapped by digest mismatches.
var ErrIntegrity = errors.New("sha512 integrity mismatch")

// copySource writes the archive to w from the mirror, or else the network.
func (b *Bootstrapper) copySource(ctx context.Context, d download, w io.Writer) (string, int64, error) {
	lim := b.opts.Limits.withDefaults()
	if b.opts.Mirror != "" {
		for _, name := range d.mirrorNames() {
			p := filepath.Join(b.opts.Mirror, name)
			mf, err := os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return "", 0, outposterr.Wrap(outposterr.Bootstrap, err, "open mirror file")
			}
			defer mf.Close()
			total := int64(-1)
			if fi, err := mf.Stat(); err == nil {
				total = fi.Size()
			}
			n, err := b.copyBody(ctx, d, w, mf, total, lim)
			if err != nil {
				return "", 0, outposterr.Wrap(outposterr.Bootstrap, err, "copy %s", p)
			}
			return p, n, nil
		}
		if b.opts.Offline {
			return "", 0, outposterr.New(outposterr.Bootstrap, "%s %s (%s): none of %s in mirror %s, and downloads are off",
				d.row.Name, d.row.Version, d.platform, strings.Join(d.mirrorNames(), ", "), b.opts.Mirror)
		}
	} else if b.opts.Offline {
		return "", 0, outposterr.New(outposterr.Bootstrap, "%s %s (%s): not in the cache, and downloads are off",
			d.row.Name, d.row.Version, d.platform)
	}

	u := d.src.URL
	if d.src.Package != "" {
		reg, err := b.registry()
		if err != nil {
			return "", 0, err
		}
		base, err := reg.For(d.src.Package)
		if err != nil {
			return "", 0, err
		}
		u = TarballURL(base, d.src.Package, d.src.NPMVersion(d.row.Version))
		n, err := b.get(ctx, d, u, w, lim)
		if !errors.Is(err, errNotFound) {
			return shownURL(u), n, err
		}
		// A registry that keeps tarballs elsewhere: ask the version
		// document for dist.tarball. Its digest is compared with the pin,
		// never trusted instead of it.
		alt, merr := b.metadataTarball(ctx, d, base)
		if merr != nil {
			return shownURL(u), 0, errors.Join(err, merr)
		}
		u = alt
	}
	n, err := b.get(ctx, d, u, w, lim)
	return shownURL(u), n, err
}

var errNotFound = errors.New("not found")

// get downloads u into w.
func (b *Bootstrapper) get(ctx context.Context, d download, u string, w io.Writer, lim Limits) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.DownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, outposterr.Wrap(outposterr.Bootstrap, err, "download %s", shownURL(u))
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, outposterr.Wrap(outposterr.Bootstrap, err, "download %s", shownURL(u))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, outposterr.Wrap(outposterr.Bootstrap, errNotFound, "download %s: %s", shownURL(u), resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, outposterr.New(outposterr.Bootstrap, "download %s: %s", shownURL(u), resp.Status)
	}
	n, err := b.copyBody(ctx, d, w, resp.Body, resp.ContentLength, lim)
	if err != nil {
		return 0, outposterr.Wrap(outposterr.Bootstrap, err, "download %s", shownURL(u))
	}
	return n, nil
}

// copyBody copies r to w, enforcing the download cap and the stall timeout
// and reporting progress.
func (b *Bootstrapper) copyBody(ctx context.Context, d download, w io.Writer, r io.Reader, total int64, lim Limits) (int64, error) {
	if total > lim.MaxDownload {
		return 0, unsafe("download is %d bytes, over the %d byte limit", total, lim.MaxDownload)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var stalled atomic.Bool
	watchdog := time.AfterFunc(b.opts.StallTimeout, func() {
		stalled.Store(true)
		cancel(fmt.Errorf("no data for %s", b.opts.StallTimeout))
		if c, ok := r.(io.Closer); ok {
			_ = c.Close() // unblock a read the context cannot reach
		}
	})
	defer watchdog.Stop()
	buf := make([]byte, 256*1024)
	var done int64
	b.progress(d, "download", 0, total)
	for {
		if err := ctx.Err(); err != nil {
			return done, context.Cause(ctx)
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			watchdog.Reset(b.opts.StallTimeout)
			done += int64(n)
			if done > lim.MaxDownload {
				return done, unsafe("download exceeds the %d byte limit", lim.MaxDownload)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return done, err
			}
			b.progress(d, "download", done, total)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if stalled.Load() {
				return done, context.Cause(ctx)
			}
			return done, rerr
		}
	}
	if total >= 0 && done != total {
		return done, fmt.Errorf("short download: %d of %d bytes", done, total)
	}
	return done, nil
}

// metadataTarball reads dist.tarball from the registry's version document
// and checks that the registry's dist.integrity agrees with the pin.
func (b *Bootstrapper) metadataTarball(ctx context.Context, d download, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	pkg := strings.Replace(d.src.Package, "/", "%2f", 1)
	u := base + pkg + "/" + url.PathEscape(d.src.NPMVersion(d.row.Version))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "package metadata")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "package metadata %s", shownURL(u))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", outposterr.New(outposterr.Bootstrap, "package metadata %s: %s", shownURL(u), resp.Status)
	}
	var doc struct {
		Dist struct {
			Tarball   string `json:"tarball"`
			Integrity string `json:"integrity"`
		} `json:"dist"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&doc); err != nil {
		return "", outposterr.Wrap(outposterr.Bootstrap, err, "package metadata %s", shownURL(u))
	}
	if got, err := ParseIntegrity(doc.Dist.Integrity); err == nil && !got.Equal(d.pin) {
		return "", outposterr.Wrap(outposterr.Bootstrap, ErrIntegrity, "registry lists %s for %s@%s, the catalog pins %s",
			got, d.src.Package, d.src.NPMVersion(d.row.Version), d.pin)
	}
	t, err := url.Parse(doc.Dist.Tarball)
	if err != nil || (t.Scheme != "https" && t.Scheme != "http") {
		return "", outposterr.New(outposterr.Bootstrap, "package metadata %s: bad dist.tarball %q", shownURL(u), shownURL(doc.Dist.Tarball))
	}
	return t.String(), nil
}

func (b *Bootstrapper) progress(d download, phase string, done, total int64) {
	if b.opts.Progress != nil {
		b.opts.Progress(Progress{Name: d.row.Name, Version: d.row.Version, Platform: d.platform, Phase: phase, Done: done, Total: total})
	}
}
