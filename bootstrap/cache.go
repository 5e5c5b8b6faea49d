package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Options configure a [Bootstrapper]. Only CacheDir is required; every
// other zero value is described on its field. The library reads no
// environment variables and prints nothing: the CLI resolves the cache
// directory and the registry and passes them here.
type Options struct {
	// CacheDir is the root of the host cache (the CLI passes
	// os.UserCacheDir()/outpost). Entries live under CacheDir/cli/.
	CacheDir string
	// Catalog holds the pins. Zero value: [DefaultCatalog].
	Catalog Catalog
	// Platform is the platform to install for. Empty: [HostPlatform].
	Platform Platform
	// Registry returns the npm registry; it is called at most once, and
	// only when an npm package must be downloaded (a cache hit or an offline
	// mirror needs no registry). Typically [NPMConfig.Resolve]. Nil: npm
	// downloads fail with a bootstrap error saying how to configure one.
	Registry func() (Registry, error)
	// HTTPClient makes the downloads. Nil: a client with bounded dial, TLS
	// and response-header timeouts and no proxy.
	HTTPClient *http.Client
	// Mirror is a directory of archives by file name (the URL's base name,
	// or the name `npm pack` gives an npm tarball) consulted before the
	// network. Mirror files are verified like downloads.
	Mirror string
	// Offline forbids network downloads: only the cache and Mirror are used.
	Offline bool
	// Progress receives download progress. Nil: none.
	Progress func(Progress)
	// Limits cap download and extraction sizes. Zero fields: defaults.
	Limits Limits
	// DownloadTimeout bounds one download. Zero: 30 minutes.
	DownloadTimeout time.Duration
	// StallTimeout fails a download that receives nothing for this long.
	// Zero: 60 seconds.
	StallTimeout time.Duration
	// Logger receives debug records. Nil: discarded.
	Logger *slog.Logger
	// Now is the clock for manifests. Nil: time.Now.
	Now func() time.Time
}

// Bootstrapper installs pinned CLIs into the host cache and from there into
// sandboxes. It is safe for concurrent use, and several processes may share
// one cache directory.
type Bootstrapper struct {
	opts   Options
	cat    Catalog
	client *http.Client
	log    *slog.Logger

	mu    sync.Mutex
	keys  map[string]chan struct{} // one-slot semaphores per cache entry
	reg   *Registry
	regEr error
}

// New checks opts and returns a Bootstrapper. It touches nothing on disk.
func New(opts Options) (*Bootstrapper, error) {
	if opts.CacheDir == "" {
		return nil, outposterr.New(outposterr.Configuration, "bootstrap: no cache directory")
	}
	dir, err := filepath.Abs(opts.CacheDir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "bootstrap: cache directory")
	}
	opts.CacheDir = dir
	if opts.Catalog.rows == nil {
		opts.Catalog = DefaultCatalog()
	}
	if opts.Platform == "" {
		opts.Platform = HostPlatform()
	}
	if opts.DownloadTimeout <= 0 {
		opts.DownloadTimeout = 30 * time.Minute
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 60 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Bootstrapper{opts: opts, cat: opts.Catalog, client: opts.HTTPClient, log: opts.Logger, keys: map[string]chan struct{}{}}
	if b.client == nil {
		b.client = defaultHTTPClient()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Catalog returns the catalog in use.
func (b *Bootstrapper) Catalog() Catalog { return b.cat }

// Platform returns the platform installed for.
func (b *Bootstrapper) Platform() Platform { return b.opts.Platform }

// registry resolves Options.Registry once.
func (b *Bootstrapper) registry() (Registry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reg == nil && b.regEr == nil {
		if b.opts.Registry == nil {
			b.regEr = outposterr.New(outposterr.Bootstrap, "no npm registry configured: %s", registryHelp)
		} else if r, err := b.opts.Registry(); err != nil {
			b.regEr = outposterr.Wrap(outposterr.Bootstrap, err, "npm registry")
		} else {
			b.reg = &r
		}
	}
	if b.regEr != nil {
		return Registry{}, b.regEr
	}
	return b.reg.clone(), nil
}

// Manifest describes a cache entry; it is stored as manifest.json next to
// the entry's tree.
type Manifest struct {
	Schema    int       `json:"schema"`
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Platform  Platform  `json:"platform"`
	Source    string    `json:"source"`
	Integrity string    `json:"integrity"`
	Size      int64     `json:"size"`
	Bin       string    `json:"bin"`
	Files     []File    `json:"files"`
	Installed time.Time `json:"installed"`
}

const manifestSchema = 1

// Entry is a verified CLI in the host cache.
type Entry struct {
	Name     string
	Version  string
	Platform Platform
	// Dir is the host directory holding the installed tree (read it, never
	// write it: other processes share it).
	Dir string
	// Bin is the executable's path inside the tree, slash separated.
	Bin string
	// BinPath is the executable's host path.
	BinPath string
	// Command is the name the CLI is called by ("claude", "agy").
	Command string
	// VersionLine is the row's expected --version line (see [Row]).
	VersionLine string
	Manifest    Manifest
}

// entryDir is CacheDir/cli/<name>/<version>/<platform>.
func (b *Bootstrapper) entryDir(r Row, p Platform) string {
	return filepath.Join(b.opts.CacheDir, "cli", r.Name, r.Version, string(p))
}

// Ensure returns the verified cache entry of the named CLI at its pinned
// version, downloading, verifying and extracting it first when the cache
// does not hold it. A present entry is re-verified cheaply (manifest
// against the pin, then every file's type, mode and size) and trusted; a
// damaged one is replaced. Concurrent calls, in this and other processes,
// download once. Failures are [outposterr.Bootstrap] errors (unknown names
// and invalid pins are [outposterr.Configuration]) and leave no entry and no
// temporary file behind.
func (b *Bootstrapper) Ensure(ctx context.Context, name string) (*Entry, error) {
	return b.EnsureFor(ctx, name, b.opts.Platform)
}

// EnsureFor is [Bootstrapper.Ensure] for platform p instead of
// Options.Platform (see [DetectPlatform]).
func (b *Bootstrapper) EnsureFor(ctx context.Context, name string, p Platform) (*Entry, error) {
	r, ok := b.cat.Row(name)
	if !ok {
		return nil, outposterr.New(outposterr.Configuration, "bootstrap: no catalog row %q (known: %s)", name, strings.Join(b.cat.Names(), ", "))
	}
	src, ok := r.Sources[p]
	if !ok {
		msg := fmt.Sprintf("bootstrap %s: no pinned download for platform %s", name, p)
		if r.PinHelp != "" {
			msg += ": " + r.PinHelp
		}
		return nil, outposterr.New(outposterr.Bootstrap, "%s", msg).With(outposterr.Details{Agent: name})
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	pin, _ := ParseIntegrity(src.Integrity) // checked by Validate
	d := download{row: r, src: src, platform: p, pin: pin}
	dir := b.entryDir(r, p)

	if e, err := b.load(d, dir); err == nil {
		return e, nil
	}
	unlock, err := b.lock(ctx, d)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if e, err := b.load(d, dir); err == nil {
		return e, nil // another goroutine or process installed it meanwhile
	} else if !errors.Is(err, fs.ErrNotExist) {
		b.log.Warn("bootstrap: cache entry fails verification; replacing it", "dir", dir, "err", err)
	}
	// Whatever is at dir now (a damaged entry, or a directory without a
	// manifest that no finished install can leave) is not trusted.
	if err := os.RemoveAll(dir); err != nil {
		return nil, outposterr.Wrap(outposterr.Bootstrap, err, "remove damaged cache entry")
	}
	e, err := b.install(ctx, d, dir)
	if err != nil {
		if ctx.Err() != nil {
			// Keep the class of the cancellation (aborted or timeout).
			return nil, fmt.Errorf("bootstrap %s %s: %w (%v)", r.Name, r.Version, ctx.Err(), err) //nolint:errorlint // wrapping err too would let its class win over the cancellation's
		}
		return nil, &outposterr.Error{Class: outposterr.Bootstrap, Message: fmt.Sprintf("bootstrap %s %s", r.Name, r.Version),
			Details: outposterr.Details{Agent: name}, Cause: err}
	}
	return e, nil
}

// lock takes the in-process semaphore, then the file lock, of d's entry.
func (b *Bootstrapper) lock(ctx context.Context, d download) (func(), error) {
	key := d.row.Name + "@" + d.row.Version + "@" + string(d.platform)
	b.mu.Lock()
	sem, ok := b.keys[key]
	if !ok {
		sem = make(chan struct{}, 1)
		b.keys[key] = sem
	}
	b.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("bootstrap %s: wait for another install: %w", d.row.Name, ctx.Err())
	}
	locks := filepath.Join(b.opts.CacheDir, "locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		<-sem
		return nil, outposterr.Wrap(outposterr.Bootstrap, err, "create cache directory")
	}
	unlock, err := lockFile(ctx, filepath.Join(locks, key+".lock"))
	if err != nil {
		<-sem
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, outposterr.Wrap(outposterr.Bootstrap, err, "lock cache entry")
	}
	return func() { unlock(); <-sem }, nil
}

// load returns the verified entry in dir. A missing entry gives an error
// wrapping fs.ErrNotExist; any other error means the entry is damaged.
func (b *Bootstrapper) load(d download, dir string) (*Entry, error) {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	_, bin := d.row.Layout(d.platform)
	switch {
	case m.Schema != manifestSchema:
		return nil, fmt.Errorf("manifest schema %d", m.Schema)
	case m.Name != d.row.Name || m.Version != d.row.Version || m.Platform != d.platform:
		return nil, fmt.Errorf("manifest is for %s %s %s", m.Name, m.Version, m.Platform)
	case m.Integrity != d.pin.String():
		return nil, fmt.Errorf("manifest integrity %s, pin %s", m.Integrity, d.pin)
	case m.Bin != bin:
		return nil, fmt.Errorf("manifest executable %q, catalog %q", m.Bin, bin)
	}
	tree := filepath.Join(dir, "tree")
	binOK := false
	for _, f := range m.Files {
		if relPath(f.Path, false) != nil {
			return nil, fmt.Errorf("manifest path %q", f.Path)
		}
		fi, err := os.Lstat(filepath.Join(tree, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", f.Path, errors.Join(err, errDamaged))
		}
		ok := false
		switch f.Type {
		case "file":
			ok = fi.Mode().IsRegular() && fi.Size() == f.Size && fi.Mode().Perm() == f.Mode
		case "dir":
			ok = fi.IsDir()
		case "symlink":
			ok = fi.Mode()&fs.ModeSymlink != 0
		}
		if !ok {
			return nil, fmt.Errorf("verify %s: %w", f.Path, errDamaged)
		}
		if f.Path == bin && f.Type == "file" && f.Mode&0o111 != 0 {
			binOK = true
		}
	}
	if !binOK {
		return nil, fmt.Errorf("manifest has no executable %s: %w", bin, errDamaged)
	}
	return b.entry(d, tree, m), nil
}

// errDamaged marks a cache entry whose files disagree with its manifest.
var errDamaged = errors.New("cache entry damaged")

func (b *Bootstrapper) entry(d download, tree string, m Manifest) *Entry {
	return &Entry{
		Name:        d.row.Name,
		Version:     d.row.Version,
		Platform:    d.platform,
		Dir:         tree,
		Bin:         m.Bin,
		BinPath:     filepath.Join(tree, filepath.FromSlash(m.Bin)),
		Command:     path.Base(m.Bin),
		VersionLine: d.row.VersionLine,
		Manifest:    m,
	}
}

// install downloads, verifies and extracts d into a staging directory and
// renames it to dir. The caller holds the entry's lock.
func (b *Bootstrapper) install(ctx context.Context, d download, dir string) (*Entry, error) {
	tmp := filepath.Join(b.opts.CacheDir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	b.sweep(tmp)
	file, source, size, err := b.fetch(ctx, d, tmp)
	if err != nil {
		return nil, err
	}
	defer os.Remove(file)

	stage, err := os.MkdirTemp(tmp, "entry-*")
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	staged := false
	defer func() {
		if !staged {
			_ = os.RemoveAll(stage)
		}
	}()
	// MkdirTemp makes 0700 directories; the tree is mounted into sandboxes
	// that run as other users, so it must be readable by all.
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, err
	}
	tree := filepath.Join(stage, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(tree, 0o755); err != nil { // whatever the umask
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b.progress(d, "extract", 0, size)
	members, bin := d.row.Layout(d.platform)
	files, err := extract(ctx, f, tree, members, b.opts.Limits)
	if err != nil {
		return nil, fmt.Errorf("extract %s: %w", source, err)
	}
	binOK := false
	for _, f := range files {
		if f.Path == bin && f.Type == "file" && f.Mode&0o111 != 0 {
			binOK = true
		}
	}
	if !binOK {
		return nil, fmt.Errorf("%s holds no executable regular file for %s (members %v)", source, bin, members)
	}
	m := Manifest{
		Schema:    manifestSchema,
		Name:      d.row.Name,
		Version:   d.row.Version,
		Platform:  d.platform,
		Source:    source,
		Integrity: d.pin.String(),
		Size:      size,
		Bin:       bin,
		Files:     files,
		Installed: b.opts.Now().UTC(),
	}
	if err := writeFileSync(filepath.Join(stage, "manifest.json"), m); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	if err := os.Rename(stage, dir); err != nil {
		return nil, fmt.Errorf("publish cache entry: %w", err)
	}
	staged = true
	b.progress(d, "done", size, size)
	b.log.Debug("bootstrap: installed", "name", d.row.Name, "version", d.row.Version, "platform", d.platform, "dir", dir)
	return b.entry(d, filepath.Join(dir, "tree"), m), nil
}

// writeFileSync writes v as JSON to name and syncs it.
func writeFileSync(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(data, '\n'))
	return errors.Join(werr, f.Sync(), f.Close())
}

// staleAfter is the age after which a temporary download or staging tree
// is left over from a crashed process: far longer than any download may
// take (Options.DownloadTimeout), so a live install is never touched.
const staleAfter = 24 * time.Hour

// sweep removes leftovers of crashed installs from tmp.
func (b *Bootstrapper) sweep(tmp string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	limit := max(staleAfter, 2*b.opts.DownloadTimeout)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || b.opts.Now().Sub(fi.ModTime()) < limit {
			continue
		}
		b.log.Debug("bootstrap: removing stale temporary file", "path", e.Name())
		_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
	}
}
