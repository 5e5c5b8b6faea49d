// Package conversation keeps agent conversations — the CLI's own session
// files — outside any sandbox, so a conversation outlives its container:
// turn 1 in one lease, turn 2 in a brand-new one, and forks that continue
// independently.
//
// A [Store] saves one archive per conversation plus a [Manifest]. The
// [FileStore] keeps them in a directory: <id>.tar.zst (a tar of
// home-relative files, zstd-compressed, optionally sealed with
// XChaCha20-Poly1305 in chunks) and <id>.json (the manifest, with the
// SHA-256 of the archive as stored). Everything streams: a conversation is
// never held in memory whole. Writes are atomic (temp file, fsync, rename);
// the store never follows a link out of its directory. Identifiers are
// validated before they become path components.
//
// What is trusted: an archive holds only the files its agent declares as
// conversation storage ([Allowed]), never settings, hooks or shell startup
// files; archives are bounded ([MaxArchiveBytes], [MaxEntries],
// [MaxEntryBytes]) and their decompression is bounded too. With a key, an
// unencrypted archive is refused, and the manifest's fields that matter are
// authenticated with the archive, so a manifest edited or swapped for
// another's (a downgrade to "encrypted": false included) is refused. A
// tampered or wrongly keyed archive is a session error, never used.
//
// Capture and restore (package harness) move files between a sandbox home
// and the store through the adapter's [adapters.Storage] hook, relocating
// working-directory fields to the new sandbox's workspace.
package conversation

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// Format is the archive format [FileStore] writes: zstd-compressed tar,
// sealed in chunks when encrypted. Format 1 (no "format" field) differs
// only when encrypted; such archives are refused.
const Format = 2

// maxStoredBytes bounds an archive file: the compressed stream of at most
// MaxArchiveBytes, plus sealing overhead.
const maxStoredBytes = MaxArchiveBytes + MaxArchiveBytes/64 + 1<<20

// maxTrailingBytes bounds what may follow the end of an imported tar stream
// (tar record padding).
const maxTrailingBytes = 1 << 20

// Zstandard bounds: the window the encoder uses, the largest one the
// decoder accepts (its memory follows the window, not the input).
const (
	encoderWindow = 4 << 20
	decoderWindow = 8 << 20
)

// Manifest describes a stored conversation.
type Manifest struct {
	ID         string `json:"id"`
	Agent      string `json:"agent"`
	CLIVersion string `json:"cli_version,omitempty"`
	// Format is the archive format (see [Format]).
	Format int `json:"format,omitempty"`
	// Parent is the conversation this one was forked from.
	Parent string `json:"parent,omitempty"`
	// Cwd is the working directory the CLI ran in (inside the sandbox).
	Cwd     string    `json:"cwd"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// SHA256 is the hex digest of the archive as stored (after compression
	// and encryption); an export carries the digest of its plain tar.
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	Encrypted bool   `json:"encrypted,omitempty"`
	// Files lists the home-relative paths in the archive.
	Files []string `json:"files"`
	// Failed records that the last turn of the conversation failed (a quota
	// failure, say): the conversation is still resumable.
	Failed bool `json:"failed,omitempty"`
	// UsageTotal is the conversation's running usage total as of its last
	// turn, for CLIs that report cumulative counters (Codex): the next
	// turn's usage is the difference from it.
	UsageTotal *usage.Usage `json:"usage_total,omitempty"`
}

// boundData is what an encrypted archive authenticates of its manifest:
// every field but the digest and size and the file list. The digest is of
// the sealed bytes (so it is checked before anything is decrypted) and
// cannot be inside them; it needs no binding, because every sealed byte is
// authenticated by the seal itself. The file list is derived from the
// archive.
func (m Manifest) boundData() []byte {
	b, _ := json.Marshal(struct {
		Format                             int
		ID, Agent, CLIVersion, Parent, Cwd string
		Created, Updated                   time.Time
		Encrypted, Failed                  bool
		UsageTotal                         *usage.Usage
	}{m.Format, m.ID, m.Agent, m.CLIVersion, m.Parent, m.Cwd, m.Created, m.Updated, m.Encrypted, m.Failed, m.UsageTotal})
	return append([]byte("outpost conversation manifest\n"), b...)
}

// Store keeps conversations.
type Store interface {
	// Save stores the archive (a tar stream of home-relative files) under
	// m.ID, replacing any previous version. It fills m's digest, size and
	// file list.
	Save(ctx context.Context, m Manifest, tarStream io.Reader) (Manifest, error)
	// Load returns the manifest and the archive's tar stream, verified.
	Load(ctx context.Context, id string) (Manifest, io.ReadCloser, error)
	// Stat returns the manifest only.
	Stat(ctx context.Context, id string) (Manifest, error)
	// List returns every manifest, newest first.
	List(ctx context.Context) ([]Manifest, error)
	// Delete removes a conversation. Deleting a missing one is not an error.
	Delete(ctx context.Context, id string) error
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ValidID reports whether id is safe as a path component: letters, digits,
// '_' and '-', at most 128 characters, not starting with '-' or '_'.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func checkID(id string) error {
	if !ValidID(id) {
		return outposterr.New(outposterr.Configuration, "invalid conversation id %q (letters, digits, '_' and '-' only)", id)
	}
	return nil
}

// ErrNotFound is wrapped by errors for conversations the store lacks.
var ErrNotFound = errors.New("conversation not found")

// ErrExists is wrapped by the error of a save that would replace a stored
// conversation when [SaveOptions.NoReplace] is set.
var ErrExists = errors.New("conversation exists")

// FileStore is a [Store] in a directory.
type FileStore struct {
	dir string
	key []byte

	mu   sync.Mutex
	root *os.Root
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns a store in dir, created (mode 0700) on the first
// save. key, when non-nil, must be 32 bytes: archives are then sealed with
// XChaCha20-Poly1305. dir itself is used as given; nothing beneath it is
// followed out of it.
func NewFileStore(dir string, key []byte) (*FileStore, error) {
	if key != nil && len(key) != chacha20poly1305.KeySize {
		return nil, outposterr.New(outposterr.Configuration, "conversation key must be %d bytes, got %d", chacha20poly1305.KeySize, len(key))
	}
	return &FileStore{dir: dir, key: key}, nil
}

// OpenFileStore returns a store in a directory the caller opened (for
// instance without following links, with package safefs).
func OpenFileStore(root *os.Root, key []byte) (*FileStore, error) {
	s, err := NewFileStore(root.Name(), key)
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Close releases the store's directory.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == nil {
		return nil
	}
	err := s.root.Close()
	s.root = nil
	return err
}

// open returns the store's directory; with create it is made if missing.
func (s *FileStore) open(create bool) (*os.Root, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root != nil {
		return s.root, nil
	}
	if create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, outposterr.Wrap(outposterr.Session, err, "create conversation store")
		}
	}
	r, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, err
	}
	s.root = r
	return r, nil
}

func archiveName(id string) string  { return id + ".tar.zst" }
func manifestName(id string) string { return id + ".json" }

// SaveOptions adjust [FileStore.SaveWith].
type SaveOptions struct {
	// Allow, when set, must accept every file of the archive (see
	// [Allowlist]); a refused one fails the save with a session error.
	Allow func(path string) bool
	// SHA256, when set, is the hex digest the tar stream must have (an
	// import's manifest); a mismatch fails the save before anything is
	// stored.
	SHA256 string
	// NoReplace refuses to replace a stored conversation of the same id
	// (an error wrapping [ErrExists]).
	NoReplace bool
}

// Save implements [Store]; see [FileStore.SaveWith].
func (s *FileStore) Save(ctx context.Context, m Manifest, tarStream io.Reader) (Manifest, error) {
	return s.SaveWith(ctx, m, tarStream, SaveOptions{})
}

// SaveWith stores the tar stream under m.ID. The stream is read once,
// entry by entry, and written back as a fresh archive of regular files
// with private modes, compressed (and sealed) on the way to a temporary
// file: memory stays bounded whatever its size. A stream over the limits,
// with an unsafe or refused entry, or with the wrong digest is a session
// error and leaves the stored version (if any) untouched.
func (s *FileStore) SaveWith(ctx context.Context, m Manifest, tarStream io.Reader, opts SaveOptions) (Manifest, error) {
	if err := checkID(m.ID); err != nil {
		return m, err
	}
	if m.Parent != "" {
		if err := checkID(m.Parent); err != nil {
			return m, err
		}
		if m.Parent == m.ID {
			return m, outposterr.New(outposterr.Session, "conversation %s names itself as its parent: refusing it", m.ID)
		}
	}
	prev, err := s.Stat(ctx, m.ID)
	if opts.NoReplace && !errors.Is(err, ErrNotFound) {
		return m, outposterr.Wrap(outposterr.Configuration, fmt.Errorf("%w: %s", ErrExists, m.ID),
			"the store already holds conversation %s", m.ID)
	}
	if err == nil {
		// A corrupt or unreadable previous manifest is simply replaced.
		if !prev.Created.IsZero() {
			m.Created = prev.Created
		}
		if m.Parent == "" && prev.Parent != m.ID {
			m.Parent = prev.Parent
		}
	}
	now := time.Now().UTC()
	if m.Created.IsZero() {
		m.Created = now
	}
	m.Updated, m.Format, m.Encrypted = now, Format, s.key != nil
	m.SHA256, m.Size, m.Files = "", 0, nil

	root, err := s.open(true)
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "open conversation store")
	}
	tmp, err := tempFile(root, archiveName(m.ID))
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "write conversation %s", m.ID)
	}
	committed := false
	defer func() {
		if !committed {
			_ = root.Remove(tmp.name)
		}
	}()
	m, err = s.encode(ctx, m, tarStream, opts, tmp.f)
	if cerr := tmp.f.Close(); err == nil && cerr != nil {
		err = outposterr.Wrap(outposterr.Session, cerr, "write conversation %s", m.ID)
	}
	if err != nil {
		return m, err
	}
	// Replacing the pair is one step for every other store on this
	// directory: saves of one id racing (a fork and a resume) would
	// otherwise leave one's manifest beside the other's archive.
	unlock, err := lockStore(root, true)
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "lock conversation store")
	}
	defer unlock()
	if opts.NoReplace {
		if _, err := root.Lstat(manifestName(m.ID)); !errors.Is(err, fs.ErrNotExist) {
			return m, outposterr.Wrap(outposterr.Configuration, fmt.Errorf("%w: %s", ErrExists, m.ID),
				"the store already holds conversation %s", m.ID)
		}
	}
	// The archive first: a manifest never points at a missing archive.
	if err := root.Rename(tmp.name, archiveName(m.ID)); err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "write conversation %s", m.ID)
	}
	committed = true
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := writeAtomic(root, manifestName(m.ID), append(mb, '\n')); err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "write manifest of %s", m.ID)
	}
	syncDir(root)
	return m, nil
}

// encode streams the validated tar stream into f and fills m's digest,
// size and files.
func (s *FileStore) encode(ctx context.Context, m Manifest, in io.Reader, opts SaveOptions, f *os.File) (Manifest, error) {
	var inHash hash.Hash
	if opts.SHA256 != "" {
		inHash = sha256.New()
		in = io.TeeReader(in, inHash)
	}
	stored := sha256.New()
	fileCount := &countWriter{w: io.MultiWriter(f, stored)}
	bw := bufio.NewWriterSize(fileCount, 64<<10)
	var sealed *sealWriter
	var sink io.Writer = bw
	if s.key != nil {
		var err error
		if sealed, err = newSealWriter(bw, s.key, m.boundData()); err != nil {
			return m, outposterr.Wrap(outposterr.Session, err, "seal conversation %s", m.ID)
		}
		sink = sealed
	}
	enc, err := zstd.NewWriter(sink, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(encoderWindow), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "compress conversation %s", m.ID)
	}
	defer enc.Close()
	plain := &countWriter{w: enc, max: MaxArchiveBytes}
	tw := NewWriter(plain)
	ar := NewReader(in, opts.Allow)
	for {
		if err := ctx.Err(); err != nil {
			return m, outposterr.Wrap(outposterr.Session, err, "save conversation %s", m.ID)
		}
		e, err := ar.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, err
		}
		if err := tw.Create(e.Path, e.Size); err != nil {
			return m, s.writeErr(m.ID, err)
		}
		if _, err := io.CopyN(tw, ar, e.Size); err != nil {
			if _, ok := outposterr.As(err); ok {
				return m, err
			}
			return m, s.writeErr(m.ID, err)
		}
		m.Files = append(m.Files, e.Path)
	}
	if err := tw.Close(); err != nil {
		return m, s.writeErr(m.ID, err)
	}
	if inHash != nil {
		// What follows the end of the archive (record padding) is part of
		// the digest too.
		n, err := io.Copy(io.Discard, io.LimitReader(in, maxTrailingBytes+1))
		if err != nil {
			return m, outposterr.Wrap(outposterr.Session, err, "read conversation %s", m.ID)
		}
		if n > maxTrailingBytes {
			return m, outposterr.New(outposterr.Session, "conversation %s: data after the end of the archive", m.ID)
		}
		if got := hex.EncodeToString(inHash.Sum(nil)); !strings.EqualFold(got, opts.SHA256) {
			return m, outposterr.New(outposterr.Session, "conversation %s: sha256 mismatch (the archive is not the one its manifest describes)", m.ID)
		}
	}
	if err := enc.Close(); err != nil {
		return m, s.writeErr(m.ID, err)
	}
	if sealed != nil {
		if err := sealed.Close(); err != nil {
			return m, s.writeErr(m.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return m, s.writeErr(m.ID, err)
	}
	if err := f.Sync(); err != nil {
		return m, s.writeErr(m.ID, err)
	}
	m.SHA256, m.Size = hex.EncodeToString(stored.Sum(nil)), fileCount.n
	return m, nil
}

func (s *FileStore) writeErr(id string, err error) error {
	if errors.Is(err, errTooLarge) {
		return outposterr.New(outposterr.Session, "conversation %s is larger than %d bytes", id, MaxArchiveBytes)
	}
	return outposterr.Wrap(outposterr.Session, err, "write conversation %s", id)
}

var errTooLarge = errors.New("too large")

// countWriter counts what passes, refusing more than max (when set).
type countWriter struct {
	w   io.Writer
	n   int64
	max int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.max > 0 && c.n+int64(len(p)) > c.max {
		return 0, errTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Stat implements [Store].
func (s *FileStore) Stat(_ context.Context, id string) (Manifest, error) {
	if err := checkID(id); err != nil {
		return Manifest{}, err
	}
	notFound := outposterr.Wrap(outposterr.Session, fmt.Errorf("%w: %s", ErrNotFound, id), "no stored conversation %s in %s", id, s.dir)
	root, err := s.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, notFound
	}
	if err != nil {
		return Manifest{}, outposterr.Wrap(outposterr.Session, err, "open conversation store")
	}
	f, _, err := safefs.OpenIn(root, manifestName(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, notFound
	}
	if err != nil {
		return Manifest{}, outposterr.Wrap(outposterr.Session, err, "read manifest of %s", id)
	}
	defer f.Close()
	b, err := safefs.ReadAllMax(f, MaxManifestBytes)
	if err != nil {
		return Manifest{}, outposterr.Wrap(outposterr.Session, err, "read manifest of %s", id)
	}
	m, err := ParseManifest(b)
	if err != nil || m.ID != id {
		return Manifest{}, outposterr.New(outposterr.Session, "manifest of conversation %s is corrupt", id)
	}
	return m, nil
}

// usable refuses a well-formed manifest this version cannot use: an
// archive format newer than [Format] (or negative), and a conversation that
// names itself as its parent (restoring its lineage would never end). The
// store keeps such a conversation as it is: only its use is refused.
func (m Manifest) usable() error {
	switch {
	case m.Format < 0 || m.Format > Format:
		return outposterr.New(outposterr.Session,
			"conversation %s is in archive format %d; this version reads formats up to %d (a newer Outpost wrote it?): refusing it (the store keeps it as it is)",
			m.ID, m.Format, Format)
	case m.Parent != "" && m.Parent == m.ID:
		return outposterr.New(outposterr.Session,
			"conversation %s names itself as its parent (a corrupt or edited manifest): refusing it (the store keeps it as it is)", m.ID)
	}
	return nil
}

// ParseManifest parses a manifest, at most [MaxManifestBytes], and checks
// its identifiers. Errors never quote the input.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if len(b) > MaxManifestBytes {
		return m, outposterr.New(outposterr.Session, "conversation manifest is larger than %d bytes", MaxManifestBytes)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest is not valid JSON")
	}
	if !ValidID(m.ID) {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest has an invalid id")
	}
	if m.Parent != "" && !ValidID(m.Parent) {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest has an invalid parent id")
	}
	if m.Agent != "" && !ValidID(m.Agent) || len(m.CLIVersion) > 128 || strings.ContainsAny(m.CLIVersion, "\x00\n\r") {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest has an invalid agent or version")
	}
	if m.Cwd != "" && (!path.IsAbs(m.Cwd) || path.Clean(m.Cwd) != m.Cwd || len(m.Cwd) > 4096 || strings.ContainsAny(m.Cwd, "\x00\n\r")) {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest has an invalid working directory")
	}
	if len(m.Files) > MaxEntries {
		return Manifest{}, outposterr.New(outposterr.Session, "conversation manifest lists more than %d files", MaxEntries)
	}
	return m, nil
}

// Load implements [Store]: it checks the manifest against the key (with a
// key, only encrypted archives), verifies the archive's digest, then
// returns a stream that opens the seal and decompresses as it is read,
// bounded to [MaxArchiveBytes]. Any failure is a session error; a read
// error of the stream is one too, and nothing unauthenticated is returned.
func (s *FileStore) Load(ctx context.Context, id string) (Manifest, io.ReadCloser, error) {
	if err := checkID(id); err != nil {
		return Manifest{}, nil, err
	}
	// The manifest and its archive are read as one pair: a save or delete
	// of id waits until the archive is open.
	unlock := func() {}
	defer func() { unlock() }()
	if root, err := s.open(false); err == nil {
		u, err := lockStore(root, false)
		if err != nil {
			return Manifest{}, nil, outposterr.Wrap(outposterr.Session, err, "lock conversation store")
		}
		unlock = u
	}
	m, err := s.Stat(ctx, id)
	if err != nil {
		return m, nil, err
	}
	if err := m.usable(); err != nil {
		return m, nil, err
	}
	switch {
	case s.key != nil && !m.Encrypted:
		return m, nil, outposterr.New(outposterr.Session,
			"conversation %s is not encrypted but a conversation key is configured; refusing it (re-import it to seal it)", id)
	case m.Encrypted && s.key == nil:
		return m, nil, outposterr.New(outposterr.Session,
			"conversation %s is marked encrypted and this store has no conversation key: open it with the key it was sealed with (the store keeps it as it is)", id)
	case m.Encrypted && m.Format != Format:
		return m, nil, outposterr.New(outposterr.Session, "conversation %s is sealed in an older format this version cannot open", id)
	}
	root, err := s.open(false)
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "open conversation store")
	}
	f, fi, err := safefs.OpenIn(root, archiveName(id))
	unlock() // the open file is this version's, whatever replaces it now
	unlock = func() {}
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "read conversation %s", id)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if fi.Size() > maxStoredBytes {
		return m, nil, outposterr.New(outposterr.Session, "conversation %s: archive larger than %d bytes", id, maxStoredBytes)
	}
	if fi.Size() != m.Size {
		return m, nil, outposterr.New(outposterr.Session,
			"conversation %s: the archive is %d bytes but its manifest says %d (tampered or corrupt); refusing to use it (the store keeps it as it is)", id, fi.Size(), m.Size)
	}
	// The digest first, over the whole file, before any byte is decrypted
	// or decompressed.
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxStoredBytes+1))
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "read conversation %s", id)
	}
	if hex.EncodeToString(h.Sum(nil)) != m.SHA256 || n > maxStoredBytes {
		return m, nil, outposterr.New(outposterr.Session, "conversation %s: archive digest mismatch (tampered or corrupt); refusing to use it", id)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "read conversation %s", id)
	}
	var src io.Reader = bufio.NewReaderSize(io.LimitReader(f, n), 64<<10)
	if m.Encrypted {
		or, err := newOpenReader(src, s.key, m.boundData())
		if err == nil {
			// The first chunk opens now: a wrong key or a changed manifest
			// is refused here, not half-way through a restore.
			err = or.next()
			or.err = err
		}
		if err != nil {
			return m, nil, outposterr.New(outposterr.Session, "conversation %s: %v", id, err)
		}
		src = or
	}
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(decoderWindow), zstd.WithDecoderMaxMemory(MaxArchiveBytes))
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "decompress conversation %s", id)
	}
	ok = true
	return m, &loadReader{id: id, f: f, dec: dec}, nil
}

// loadReader is a loaded archive's plain tar stream.
type loadReader struct {
	id  string
	f   *os.File
	dec *zstd.Decoder
	n   int64
}

func (l *loadReader) Read(p []byte) (int, error) {
	if l.n >= MaxArchiveBytes {
		return 0, outposterr.New(outposterr.Session, "conversation %s is larger than %d bytes uncompressed", l.id, MaxArchiveBytes)
	}
	if rest := MaxArchiveBytes - l.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := l.dec.Read(p)
	l.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, errOpen) || errors.Is(err, errTruncated) {
			return n, outposterr.New(outposterr.Session, "conversation %s: %v", l.id, err)
		}
		return n, outposterr.Wrap(outposterr.Session, err, "decompress conversation %s", l.id)
	}
	return n, err
}

func (l *loadReader) Close() error {
	l.dec.Close()
	return l.f.Close()
}

// List implements [Store].
func (s *FileStore) List(ctx context.Context) ([]Manifest, error) {
	root, err := s.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "list conversations")
	}
	d, err := root.Open(".")
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "list conversations")
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "list conversations")
	}
	var out []Manifest
	for _, name := range names {
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !ValidID(id) {
			continue
		}
		if m, err := s.Stat(ctx, id); err == nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out, nil
}

// Delete implements [Store].
func (s *FileStore) Delete(_ context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	root, err := s.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return outposterr.Wrap(outposterr.Session, err, "open conversation store")
	}
	unlock, err := lockStore(root, true)
	if err != nil {
		return outposterr.Wrap(outposterr.Session, err, "lock conversation store")
	}
	defer unlock()
	var errs []error
	for _, p := range []string{manifestName(id), archiveName(id)} {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type temp struct {
	f    *os.File
	name string
}

// tempFile creates a new private file next to name in root.
func tempFile(root *os.Root, name string) (temp, error) {
	for range 10 {
		var r [8]byte
		_, _ = rand.Read(r[:])
		tn := "." + name + ".tmp-" + hex.EncodeToString(r[:])
		f, err := root.OpenFile(tn, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return temp{f, tn}, err
	}
	return temp{}, errors.New("cannot create a temporary file")
}

// writeAtomic replaces name in root through a synced temporary file.
func writeAtomic(root *os.Root, name string, content []byte) error {
	t, err := tempFile(root, name)
	if err != nil {
		return err
	}
	_, err = t.f.Write(content)
	if err == nil {
		err = t.f.Sync()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(t.name, name)
	}
	if err != nil {
		_ = root.Remove(t.name)
	}
	return err
}

// syncDir makes the renames durable (best effort).
func syncDir(root *os.Root) {
	if d, err := root.Open("."); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
