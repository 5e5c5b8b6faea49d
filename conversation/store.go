// Package conversation keeps agent conversations — the CLI's own session
// files — outside any sandbox, so a conversation outlives its container:
// turn 1 in one lease, turn 2 in a brand-new one, and forks that continue
// independently.
//
// A [Store] saves one archive per conversation plus a [Manifest]. The
// [FileStore] keeps them under a directory (default .outpost/conversations):
// <id>.tar.zst (a tar of home-relative files, zstd-compressed, optionally
// sealed with XChaCha20-Poly1305) and <id>.json (the manifest, with the
// SHA-256 of the archive as stored). Writes are atomic (temp file, fsync,
// rename). Identifiers are validated before they become path components. A
// tampered or wrongly keyed archive is a session error, never used.
//
// Capture and restore (package harness) move files between a sandbox home
// and the store through the adapter's [adapters.Storage] hook, relocating
// working-directory fields to the new sandbox's workspace.
package conversation

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// MaxArchiveBytes bounds one stored archive.
const MaxArchiveBytes = 256 << 20

// Manifest describes a stored conversation.
type Manifest struct {
	ID         string `json:"id"`
	Agent      string `json:"agent"`
	CLIVersion string `json:"cli_version,omitempty"`
	// Parent is the conversation this one was forked from.
	Parent string `json:"parent,omitempty"`
	// Cwd is the working directory the CLI ran in (inside the sandbox).
	Cwd     string    `json:"cwd"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// SHA256 is the hex digest of the archive as stored (after compression
	// and encryption).
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

// Store keeps conversations.
type Store interface {
	// Save stores the archive (a tar stream of home-relative files) under
	// m.ID, replacing any previous version. It fills m's digest and size.
	Save(ctx context.Context, m Manifest, tarStream io.Reader) (Manifest, error)
	// Load returns the manifest and the archive's tar stream.
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

// FileStore is a [Store] in a directory.
type FileStore struct {
	dir string
	key []byte
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns a store in dir. key, when non-nil, must be 32 bytes:
// archives are then sealed with XChaCha20-Poly1305.
func NewFileStore(dir string, key []byte) (*FileStore, error) {
	if key != nil && len(key) != chacha20poly1305.KeySize {
		return nil, outposterr.New(outposterr.Configuration, "conversation key must be %d bytes, got %d", chacha20poly1305.KeySize, len(key))
	}
	return &FileStore{dir: dir, key: key}, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) paths(id string) (archive, manifest string) {
	return filepath.Join(s.dir, id+".tar.zst"), filepath.Join(s.dir, id+".json")
}

// Save implements [Store].
func (s *FileStore) Save(ctx context.Context, m Manifest, tarStream io.Reader) (Manifest, error) {
	if err := checkID(m.ID); err != nil {
		return m, err
	}
	if m.Parent != "" {
		if err := checkID(m.Parent); err != nil {
			return m, err
		}
	}
	raw, err := io.ReadAll(io.LimitReader(tarStream, MaxArchiveBytes+1))
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "read conversation %s", m.ID)
	}
	if len(raw) > MaxArchiveBytes {
		return m, outposterr.New(outposterr.Session, "conversation %s is larger than %d bytes", m.ID, MaxArchiveBytes)
	}
	data, err := compress(raw)
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "compress conversation %s", m.ID)
	}
	if s.key != nil {
		if data, err = seal(s.key, m.ID, data); err != nil {
			return m, err
		}
		m.Encrypted = true
	} else {
		m.Encrypted = false
	}
	sum := sha256.Sum256(data)
	m.SHA256, m.Size = hex.EncodeToString(sum[:]), int64(len(data))
	now := time.Now().UTC()
	if prev, err := s.Stat(ctx, m.ID); err == nil && !prev.Created.IsZero() {
		m.Created = prev.Created
		if m.Parent == "" {
			m.Parent = prev.Parent
		}
	}
	if m.Created.IsZero() {
		m.Created = now
	}
	m.Updated = now
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "create conversation store")
	}
	archive, manifest := s.paths(m.ID)
	mb, _ := json.MarshalIndent(m, "", "  ")
	// The archive first: a manifest never points at a missing archive.
	if err := writeAtomic(archive, data); err != nil {
		return m, err
	}
	if err := writeAtomic(manifest, append(mb, '\n')); err != nil {
		return m, err
	}
	return m, nil
}

// Stat implements [Store].
func (s *FileStore) Stat(_ context.Context, id string) (Manifest, error) {
	if err := checkID(id); err != nil {
		return Manifest{}, err
	}
	_, manifest := s.paths(id)
	b, err := os.ReadFile(manifest)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, outposterr.Wrap(outposterr.Session, fmt.Errorf("%w: %s", ErrNotFound, id), "no stored conversation %s in %s", id, s.dir)
	}
	if err != nil {
		return Manifest{}, outposterr.Wrap(outposterr.Session, err, "read manifest of %s", id)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id {
		return Manifest{}, outposterr.New(outposterr.Session, "manifest of conversation %s is corrupt", id)
	}
	return m, nil
}

// Load implements [Store]: it verifies the digest, then opens the seal,
// then decompresses; any failure is a session error and nothing is returned.
func (s *FileStore) Load(ctx context.Context, id string) (Manifest, io.ReadCloser, error) {
	m, err := s.Stat(ctx, id)
	if err != nil {
		return m, nil, err
	}
	archive, _ := s.paths(id)
	data, err := readBounded(archive)
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "read conversation %s", id)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != m.SHA256 {
		return m, nil, outposterr.New(outposterr.Session, "conversation %s: archive digest mismatch (tampered or corrupt); refusing to use it", id)
	}
	if m.Encrypted {
		if s.key == nil {
			return m, nil, outposterr.New(outposterr.Session, "conversation %s is encrypted and no key is configured", id)
		}
		if data, err = open(s.key, id, data); err != nil {
			return m, nil, err
		}
	}
	raw, err := decompress(data)
	if err != nil {
		return m, nil, outposterr.Wrap(outposterr.Session, err, "decompress conversation %s", id)
	}
	return m, io.NopCloser(bytes.NewReader(raw)), nil
}

// List implements [Store].
func (s *FileStore) List(ctx context.Context) ([]Manifest, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "list conversations")
	}
	var out []Manifest
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
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
	archive, manifest := s.paths(id)
	var errs []error
	for _, p := range []string{manifest, archive} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxArchiveBytes+1))
	if err == nil && len(b) > MaxArchiveBytes {
		err = fmt.Errorf("archive larger than %d bytes", MaxArchiveBytes)
	}
	return b, err
}

// seal encrypts data; the conversation id is authenticated as associated
// data, so an archive renamed to another id does not open.
func seal(key []byte, id string, data []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "conversation key")
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(data)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, outposterr.Wrap(outposterr.Session, err, "nonce")
	}
	return aead.Seal(nonce, nonce, data, []byte(id)), nil
}

func open(key []byte, id string, data []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "conversation key")
	}
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, outposterr.New(outposterr.Session, "conversation %s: sealed archive too short", id)
	}
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, outposterr.New(outposterr.Session, "conversation %s: cannot open the archive (wrong key or tampered)", id)
	}
	return plain, nil
}

// writeAtomic writes p through a temp file in the same directory.
func writeAtomic(p string, content []byte) error {
	if err := atomicfile.Write(p, content, 0o600); err != nil {
		return outposterr.Wrap(outposterr.Session, err, "write %s", p)
	}
	return nil
}
