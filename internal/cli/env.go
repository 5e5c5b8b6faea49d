package cli

import (
	"bytes"
	"encoding/json"
	"os"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

// readMCP reads an MCP declaration file: {"servers": [MCPServer, ...]}.
func readMCP(path string) ([]credentials.MCPServer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read --mcp")
	}
	var doc struct {
		Servers []credentials.MCPServer `json:"servers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "parse --mcp %s", path)
	}
	for _, s := range doc.Servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	return doc.Servers, nil
}
