package conversation

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

// Limits on a conversation archive, enforced when one is captured, stored,
// imported, loaded or restored.
const (
	// MaxEntries bounds the files (and directories) of one conversation.
	MaxEntries = 10000
	// MaxEntryBytes bounds one file.
	MaxEntryBytes = 128 << 20
	// MaxArchiveBytes bounds a whole conversation: its tar stream,
	// uncompressed. A capture over it is not stored (the previous version
	// stays) and reported as a warning.
	MaxArchiveBytes = 256 << 20
	// MaxManifestBytes bounds one manifest.
	MaxManifestBytes = 1 << 20
)

// TranscriptPath is Outpost's own record of a conversation inside its
// archive: one JSON line per turn (prompt and final text). It is never
// restored into a sandbox.
const TranscriptPath = ".outpost-transcript.jsonl"

// File is one file of a conversation, named relative to the home.
type File struct {
	Path    string
	Mode    int64
	Content []byte
}

// Entry is a file of a conversation archive being read.
type Entry struct {
	Path string
	Size int64
}

// Reader reads a conversation tar stream entry by entry, refusing (with a
// session error) anything but regular files and directories, names that
// are not clean relative paths, duplicates, and archives over the limits.
// Directories are implied by file paths and skipped.
type Reader struct {
	tr      *tar.Reader
	allow   func(string) bool
	entries int
	total   int64
	seen    map[string]bool
}

// NewReader reads the tar stream r. allow, when set, must accept every
// file's path (see [Allowed]).
func NewReader(r io.Reader, allow func(path string) bool) *Reader {
	return &Reader{tr: tar.NewReader(r), allow: allow, seen: map[string]bool{}}
}

// Next advances to the next file; io.EOF at the end of the archive.
func (r *Reader) Next() (Entry, error) {
	for {
		h, err := r.tr.Next()
		if errors.Is(err, io.EOF) {
			return Entry{}, io.EOF
		}
		if err != nil {
			return Entry{}, outposterr.Wrap(outposterr.Session, err, "read conversation archive")
		}
		if r.entries++; r.entries > MaxEntries {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive has more than %d entries", MaxEntries)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !SafePath(name) {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive entry %q escapes the home directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive entry %q is not a regular file", h.Name)
		}
		if r.allow != nil && !r.allow(name) {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive entry %q is not a conversation file of this agent", h.Name)
		}
		if r.seen[name] {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive entry %q appears twice", h.Name)
		}
		r.seen[name] = true
		if h.Size < 0 || h.Size > MaxEntryBytes {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive entry %q is larger than %d bytes", h.Name, MaxEntryBytes)
		}
		if r.total += h.Size; r.total > MaxArchiveBytes {
			return Entry{}, outposterr.New(outposterr.Session, "conversation archive is larger than %d bytes", MaxArchiveBytes)
		}
		return Entry{Path: name, Size: h.Size}, nil
	}
}

// Read reads the current file's content.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.tr.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = outposterr.Wrap(outposterr.Session, err, "read conversation archive")
	}
	return n, err
}

// ReadFiles reads a whole conversation tar stream into memory (see
// [Reader]; no allowlist). It suits small archives and tests; capture and
// restore stream.
func ReadFiles(r io.Reader) ([]File, error) {
	ar := NewReader(r, nil)
	var out []File
	for {
		e, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(ar)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: e.Path, Mode: 0o600, Content: b})
	}
}

// Writer writes a conversation tar stream with private modes (directories
// 0700, files 0600), adding each file's parent directories once.
type Writer struct {
	tw   *tar.Writer
	dirs map[string]bool
}

// NewWriter writes the tar stream to w.
func NewWriter(w io.Writer) *Writer { return &Writer{tw: tar.NewWriter(w), dirs: map[string]bool{}} }

// Create starts file p of size bytes; its content follows through Write.
func (w *Writer) Create(p string, size int64) error {
	if !SafePath(p) {
		return outposterr.New(outposterr.Session, "unsafe conversation path %q", p)
	}
	var parents []string
	for d := path.Dir(p); d != "." && !w.dirs[d]; d = path.Dir(d) {
		parents = append(parents, d)
	}
	for i := len(parents) - 1; i >= 0; i-- {
		w.dirs[parents[i]] = true
		if err := w.tw.WriteHeader(&tar.Header{Name: parents[i] + "/", Mode: 0o700, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return w.tw.WriteHeader(&tar.Header{Name: p, Mode: 0o600, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
}

// Write writes content of the current file.
func (w *Writer) Write(b []byte) (int, error) { return w.tw.Write(b) }

// Close ends the archive (it does not close the underlying writer).
func (w *Writer) Close() error { return w.tw.Close() }

// WriteFiles writes files as a tar stream (see [Writer]).
func WriteFiles(files []File) ([]byte, error) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, f := range files {
		if err := w.Create(f.Path, int64(len(f.Content))); err != nil {
			return nil, err
		}
		if _, err := w.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write conversation archive: %w", err)
	}
	return buf.Bytes(), nil
}

// SafePath reports whether p is a clean relative path without "..".
func SafePath(p string) bool {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.Contains(p, "\\") {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return false
		}
	}
	return true
}

// Allowed reports whether the home-relative path p belongs to conversation
// id of an agent whose CLI ran in cwd: one of the paths the adapter's
// [adapters.Storage] declares for it (or a file beneath one), accepted by
// its [adapters.StorageFilter] if it has one, or Outpost's [TranscriptPath].
// Nothing else — settings, hooks, shell startup files, credentials — is
// ever captured or restored.
func Allowed(st adapters.Storage, id, cwd, p string) bool {
	if p == TranscriptPath {
		return true
	}
	if !SafePath(p) || !ValidID(id) {
		return false
	}
	for _, d := range st.ConversationPaths(id, cwd) {
		if !SafePath(d) {
			continue
		}
		if p == d || strings.HasPrefix(p, d+"/") {
			if f, ok := st.(adapters.StorageFilter); ok && !f.Keep(id, p) {
				return false
			}
			return true
		}
	}
	return false
}

// Allowlist is [Allowed] for one conversation, as a [NewReader] filter.
func Allowlist(st adapters.Storage, id, cwd string) func(string) bool {
	return func(p string) bool { return Allowed(st, id, cwd, p) }
}
