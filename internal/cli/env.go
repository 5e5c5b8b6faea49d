package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

// maxMCPFileBytes bounds an --mcp file: far above any real declaration.
const maxMCPFileBytes = 1 << 20

// readMCP reads an MCP declaration file: {"servers": [MCPServer, ...]}.
// The file is bounded and its content never quoted in errors.
func readMCP(path string) ([]credentials.MCPServer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read --mcp")
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		return nil, outposterr.New(outposterr.Configuration, "--mcp %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMCPFileBytes+1))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read --mcp")
	}
	if len(b) > maxMCPFileBytes {
		return nil, outposterr.New(outposterr.Configuration, "--mcp %s is larger than %d KiB", path, maxMCPFileBytes>>10)
	}
	var doc struct {
		Servers []credentials.MCPServer `json:"servers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, outposterr.New(outposterr.Configuration, "parse --mcp %s: invalid JSON at byte %d", path, syn.Offset)
		case errors.As(err, &typ):
			return nil, outposterr.New(outposterr.Configuration, "parse --mcp %s: %s must be %s", path, typ.Field, typ.Type)
		}
		return nil, outposterr.New(outposterr.Configuration, "parse --mcp %s: not a {\"servers\": [...]} declaration (%s)", path, safeJSONError(err))
	}
	if dec.More() {
		return nil, outposterr.New(outposterr.Configuration, "parse --mcp %s: more than one JSON value", path)
	}
	for _, s := range doc.Servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	return doc.Servers, nil
}

// safeJSONError keeps the decoder's message when it names a field (unknown
// field "x"), never a value; anything else is summarized.
func safeJSONError(err error) string {
	msg := err.Error()
	if bytes.HasPrefix([]byte(msg), []byte("json: unknown field ")) {
		return msg[len("json: "):]
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the file ends early"
	}
	return "malformed"
}
