package conversation

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/outpost-dev/outpost/outposterr"
)

// Limits on an archive's content, checked when it is read back.
const (
	MaxEntries    = 10000
	MaxEntryBytes = 128 << 20
)

func compress(raw []byte) ([]byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil), nil
}

func decompress(data []byte) ([]byte, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxArchiveBytes))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return dec.DecodeAll(data, nil)
}

// File is one file of a conversation, named relative to the home.
type File struct {
	Path    string
	Mode    int64
	Content []byte
}

// ReadFiles reads a conversation tar stream, refusing anything but regular
// files and directories with safe relative names, within the size limits.
// Directories are implied by file paths and not returned.
func ReadFiles(r io.Reader) ([]File, error) {
	tr := tar.NewReader(r)
	var out []File
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Session, err, "read conversation archive")
		}
		if n >= MaxEntries {
			return nil, outposterr.New(outposterr.Session, "conversation archive has more than %d entries", MaxEntries)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !SafePath(name) {
			return nil, outposterr.New(outposterr.Session, "conversation archive entry %q escapes the home directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, outposterr.New(outposterr.Session, "conversation archive entry %q is not a regular file", h.Name)
		}
		if h.Size > MaxEntryBytes {
			return nil, outposterr.New(outposterr.Session, "conversation archive entry %q is too large", h.Name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, MaxEntryBytes))
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Session, err, "read conversation archive")
		}
		out = append(out, File{Path: name, Mode: h.Mode & 0o777, Content: b})
	}
}

// WriteFiles writes files as a tar stream with private modes: directories
// 0700, files 0600.
func WriteFiles(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		if !SafePath(f.Path) {
			return nil, outposterr.New(outposterr.Session, "unsafe conversation path %q", f.Path)
		}
		var parents []string
		for d := path.Dir(f.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(&tar.Header{Name: parents[i] + "/", Mode: 0o700, Typeflag: tar.TypeDir}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: 0o600, Size: int64(len(f.Content)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
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
