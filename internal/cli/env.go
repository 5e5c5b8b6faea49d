package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/joho/godotenv"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
)

// envFile is the project's declared variables, relative to the project root
// (the current directory).
const envFile = ".outpost/.env"

// relocationVars are variables that move a CLI's home-relative login files.
var relocationVars = []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"}

// loadCredentials resolves the declared variables (.outpost/.env plus --env
// forwards) and builds the turn's credential choice.
func loadCredentials(f *Factory, auth credentials.Auth, forwarded []string) (*harness.Credentials, error) {
	declared, err := readEnvFile(envFile)
	if err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) {
		v := f.Getenv(k)
		return v, v != ""
	}
	vars, err := credentials.Declared(declared, lookup, forwarded)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	reloc := map[string]string{}
	for _, k := range relocationVars {
		if v := f.Getenv(k); v != "" {
			reloc[k] = v
		}
	}
	return &harness.Credentials{Auth: auth, Vars: vars, HostHome: home, Relocate: reloc}, nil
}

// readEnvFile parses a dotenv file; a missing file declares nothing.
func readEnvFile(path string) (map[string]string, error) {
	fh, err := os.Open(filepath.Clean(path))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read %s", path)
	}
	defer fh.Close()
	m, err := godotenv.Parse(fh)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "parse %s", path)
	}
	return m, nil
}

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
