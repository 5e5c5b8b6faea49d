package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"github.com/joho/godotenv"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
)

// configDir is the project's configuration directory, relative to the
// project root (the current directory). Docker leases never see it.
const configDir = ".outpost"

// envFile is the project's declared variables, relative to the project root.
const envFile = configDir + "/.env"

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

// maxEnvFileBytes bounds .outpost/.env.
const maxEnvFileBytes = 1 << 20

// readEnvFile parses the dotenv file rel beneath the current directory; a
// missing file declares nothing. The file is project configuration an
// agent or a repository may have planted: no component of rel may be a
// link, it must be a regular file owned by the user (or root) and writable
// by no one else, and errors never show its content.
func readEnvFile(rel string) (map[string]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	b, fi, err := safefs.ReadFile(wd, rel, maxEnvFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err == nil {
		err = safefs.CheckOwner(rel, fi)
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "refusing %s", rel)
	}
	m, err := godotenv.UnmarshalBytes(b)
	if err != nil {
		// The parser's message quotes the file; a link to a credentials
		// file would print its keys.
		return nil, outposterr.New(outposterr.Configuration, "parse %s: not a dotenv file of NAME=value lines (its content is not shown)", rel)
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
