package outpost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/joho/godotenv"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
)

// ConfigDir is a project's configuration directory, relative to the
// project root. Container leases never see it.
const ConfigDir = ".outpost"

// EnvFile is the project's declared variables, relative to the project root.
const EnvFile = ConfigDir + "/.env"

// maxEnvFileBytes bounds .outpost/.env.
const maxEnvFileBytes = 1 << 20

// Getenv looks a variable up; nil looks nothing up. Outpost's library
// never reads the process environment itself: a caller that wants it
// passes os.Getenv.
type Getenv func(string) string

func (g Getenv) get(k string) string {
	if g == nil {
		return ""
	}
	return g(k)
}

// ReadEnvFile parses project's .outpost/.env; a missing file declares
// nothing. The file is project configuration an agent or a repository may
// have planted: no component of its path may be a link, it must be a
// regular file owned by the user (or root) and writable by no one else,
// and errors never show its content.
func ReadEnvFile(project string) (map[string]string, error) {
	b, fi, err := safefs.ReadFile(project, EnvFile, maxEnvFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err == nil {
		err = safefs.CheckOwner(EnvFile, fi)
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "refusing %s", EnvFile)
	}
	m, err := godotenv.UnmarshalBytes(b)
	if err != nil {
		// The parser's message quotes the file; a link to a credentials
		// file would print its keys.
		return nil, outposterr.New(outposterr.Configuration, "parse %s: not a dotenv file of NAME=value lines (its content is not shown)", EnvFile)
	}
	// The parser keeps the last of two declarations of a name: one of them
	// is a mistake, and which one wins should not be a surprise.
	seen := map[string]bool{}
	for _, k := range dotenvKeys(b) {
		if seen[k] {
			return nil, outposterr.New(outposterr.Configuration, "%s declares %s twice; keep one", EnvFile, k)
		}
		seen[k] = true
	}
	if len(seen) != len(m) {
		return nil, outposterr.New(outposterr.Configuration, "parse %s: not a dotenv file of NAME=value lines (its content is not shown)", EnvFile)
	}
	return m, nil
}

// dotenvKeys lists the names a dotenv file declares, in order and with
// repetitions, reading statements exactly as godotenv's parser delimits
// them (comments, "export", NAME=value or NAME: value, quoted values that
// span lines, a backslash escaping a quote). It stops at what the parser
// would refuse; ReadEnvFile compares the names with the parser's.
func dotenvKeys(src []byte) []string {
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	isSpace := func(r rune) bool {
		switch r {
		case '\t', '\v', '\f', '\r', ' ', 0x85, 0xA0:
			return true
		}
		return false
	}
	var keys []string
	for {
		// The next statement: skip blank space and comment lines.
		i := bytes.IndexFunc(src, func(r rune) bool { return !unicode.IsSpace(r) })
		if i < 0 {
			return keys
		}
		src = src[i:]
		if src[0] == '#' {
			j := bytes.IndexByte(src, '\n')
			if j < 0 {
				return keys
			}
			src = src[j:]
			continue
		}
		src = bytes.TrimLeftFunc(src, isSpace)
		if rest, ok := bytes.CutPrefix(src, []byte("export")); ok && bytes.IndexFunc(rest, isSpace) == 0 {
			src = bytes.TrimLeftFunc(rest, isSpace)
		}
		j := bytes.IndexAny(src, "=:")
		if j < 0 {
			// The parser reads a last line without '=' as an empty name
			// (refused later as not a variable name).
			return append(keys, "")
		}
		keys = append(keys, strings.TrimRightFunc(string(src[:j]), unicode.IsSpace))
		src = bytes.TrimLeftFunc(src[j+1:], isSpace)
		if len(src) > 0 && (src[0] == '"' || src[0] == '\'') {
			q, end := src[0], -1
			for k := 1; k < len(src); k++ {
				if src[k] == q && src[k-1] != '\\' {
					end = k
					break
				}
			}
			if end < 0 {
				return keys
			}
			src = src[end+1:]
			continue
		}
		j = bytes.IndexAny(src, "\n\r")
		if j < 0 {
			return keys
		}
		src = src[j:]
	}
}

// LoadCredentials resolves the project's declared variables (.outpost/.env
// plus the forwarded names, whose values come from getenv) into the
// credential choice auth. relocation lists the variables that move a CLI's
// home-relative login files ([agents.Registry.RelocationVars]): a project
// may not set them, and their host values say where the login files are.
func LoadCredentials(project string, auth credentials.Auth, forwarded []string, getenv Getenv, relocation []string) (*harness.Credentials, error) {
	declared, err := ReadEnvFile(project)
	if err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) {
		v := getenv.get(k)
		return v, v != ""
	}
	vars, err := credentials.Declared(declared, lookup, forwarded, relocation)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	reloc := map[string]string{}
	for _, k := range relocation {
		if v := getenv.get(k); v != "" {
			reloc[k] = v
		}
	}
	return &harness.Credentials{Auth: auth, Vars: vars, HostHome: home, Relocate: reloc}, nil
}

// StateEnv overrides Outpost's state directory, which holds each project's
// conversation store.
const StateEnv = "OUTPOST_STATE_DIR"

// StateDir is Outpost's state directory: $OUTPOST_STATE_DIR, else
// $XDG_STATE_HOME/outpost, else ~/.local/state/outpost. It is outside every
// workspace, so no agent can plant links or files in it.
func StateDir(getenv Getenv) (string, error) {
	if v := getenv.get(StateEnv); v != "" {
		return filepath.Abs(v)
	}
	if v := getenv.get("XDG_STATE_HOME"); v != "" && filepath.IsAbs(v) {
		return filepath.Join(v, "outpost"), nil
	}
	home := getenv.get("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", outposterr.Wrap(outposterr.Configuration, err, "find the state directory (set %s or pass --store)", StateEnv)
		}
	}
	return filepath.Join(home, ".local", "state", "outpost"), nil
}

// ParseKey parses a conversation encryption key: 32 bytes, hex or base64.
// An empty text is no key.
func ParseKey(text string) ([]byte, error) {
	v := strings.TrimSpace(text)
	if v == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) != 32 {
		if key, err = base64.StdEncoding.DecodeString(v); err != nil || len(key) != 32 {
			return nil, outposterr.New(outposterr.Configuration, "the conversation key must be 32 bytes, hex or base64 encoded")
		}
	}
	return key, nil
}

// StoreOptions say where a conversation store is.
type StoreOptions struct {
	// Dir is the store directory; empty: the project's store in the state
	// directory (StateDir/projects/<hash of Project>/conversations).
	Dir string
	// Project is the project directory (absolute); Workspace the turn's.
	// A store inside either is opened without following links.
	Project, Workspace string
	// Key seals archives (XChaCha20-Poly1305); nil: plain.
	Key []byte
	// Getenv finds the state directory.
	Getenv Getenv
}

// OpenStore opens (creating) a conversation store.
func OpenStore(o StoreOptions) (*conversation.FileStore, error) {
	var r *os.Root
	if o.Dir == "" {
		state, err := StateDir(o.Getenv)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(o.Project))
		project := filepath.Join(state, "projects", hex.EncodeToString(sum[:8]))
		p, err := openDir(project, o.Project, o.Workspace)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		if fh, err := p.OpenFile("project", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			_, _ = fh.WriteString(o.Project + "\n")
			_ = fh.Close()
		}
		if r, err = safefs.OpenDirIn(p, "conversations", true); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "open the conversation store")
		}
	} else {
		var err error
		if r, err = openDir(o.Dir, o.Project, o.Workspace); err != nil {
			return nil, err
		}
	}
	return conversation.OpenFileStore(r, o.Key)
}

// openDir opens (creating) a directory Outpost keeps state in. One inside
// the project or the workspace — places an agent or a repository may have
// shaped — is opened without following any link below that directory and
// must be owned by the user (or root); one elsewhere is the user's (the
// state directory, a store of their choice) and opened as given.
func openDir(dir, project, workspace string) (*os.Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "conversation store")
	}
	var roots []string
	for _, root := range []string{project, workspace} {
		if root == "" {
			continue
		}
		if a, err := filepath.Abs(root); err == nil {
			roots = append(roots, a)
		}
	}
	for _, root := range roots {
		rel, err := filepath.Rel(root, abs)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			continue
		}
		r, err := safefs.OpenDir(root, rel, true)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "open the conversation store %s", abs)
		}
		fi, err := r.Stat(".")
		if err == nil {
			err = safefs.CheckOwner(abs, fi)
		}
		if err != nil {
			r.Close()
			return nil, outposterr.Wrap(outposterr.Configuration, err, "open the conversation store")
		}
		return r, nil
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "create the conversation store")
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "open the conversation store")
	}
	return r, nil
}

// AgentTable is the agent registry of one runner: the built-in rows plus
// the project's spec-defined drivers, each driver file read once.
type AgentTable struct {
	Registry *agents.Registry
	Drivers  []agents.DriverResult
}

// LoadAgents adds the spec-defined drivers of project to reg.
func LoadAgents(reg *agents.Registry, project string) (*AgentTable, error) {
	drivers, err := reg.LoadDrivers(project)
	if err != nil {
		return nil, err
	}
	return &AgentTable{Registry: reg, Drivers: drivers}, nil
}

// Lookup returns the row named name. A driver file of that name that did
// not load reports its own error.
func (t *AgentTable) Lookup(name string) (agents.Agent, error) {
	if a, ok := t.Registry.Lookup(name); ok {
		return a, nil
	}
	for _, d := range t.Drivers {
		if d.Err != nil && filepath.Base(d.Path) == name+".json" {
			return agents.Agent{}, d.Err
		}
	}
	_, err := t.Registry.Adapter(name)
	return agents.Agent{}, err
}

// Settings for bootstrap, read through Getenv.
const (
	RegistryEnv = "OUTPOST_NPM_REGISTRY" // wins over npm's own configuration
	MirrorEnv   = "OUTPOST_CLI_MIRROR"   // a directory of archives standing in for the network
	CacheEnv    = "OUTPOST_CACHE_DIR"    // default: the user cache directory + /outpost
)

// BootstrapOptions configure [NewBootstrapper]. Zero values are documented
// per field.
type BootstrapOptions struct {
	// CacheDir is the verified CLI cache (empty: $OUTPOST_CACHE_DIR, else
	// the user cache directory + /outpost).
	CacheDir string
	// Registry is the npm registry URL (empty: $OUTPOST_NPM_REGISTRY, else
	// npm's own configuration: NPM_CONFIG_REGISTRY, .npmrc, npm config).
	Registry string
	// Mirror is a directory of archives standing in for the network
	// (empty: $OUTPOST_CLI_MIRROR).
	Mirror string
	// Offline uses only the cache and the mirror.
	Offline bool
	// Project is where a project .npmrc is looked for.
	Project string
	// Getenv reads the settings above and npm's variables.
	Getenv Getenv
	// Progress receives download progress (nil: none).
	Progress func(bootstrap.Progress)
	// HTTPClient downloads (nil: a client without a proxy; the outpost
	// command passes one that honours HTTPS_PROXY).
	HTTPClient *http.Client
	// Agents are the agents whose pinned CLIs (their rows' CLI) form the
	// catalog (nil: [agents.Builtin]).
	Agents *agents.Registry
}

// NewBootstrapper builds the bootstrapper of the pinned CLIs.
func NewBootstrapper(ctx context.Context, o BootstrapOptions) (*bootstrap.Bootstrapper, error) {
	cache := o.CacheDir
	if cache == "" {
		cache = o.Getenv.get(CacheEnv)
	}
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "find the user cache directory (set %s)", CacheEnv)
		}
		cache = filepath.Join(dir, "outpost")
	}
	if o.Registry == "" {
		o.Registry = o.Getenv.get(RegistryEnv)
	}
	if o.Mirror == "" {
		o.Mirror = o.Getenv.get(MirrorEnv)
	}
	agentRows := o.Agents
	if agentRows == nil {
		agentRows = agents.Builtin()
	}
	cat, err := agentRows.Catalog()
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	reg := bootstrap.NPMConfig{Setting: o.Registry, Getenv: o.Getenv.get, Dir: o.Project, Home: home,
		RunNPM: bootstrap.NPMCommand(ctx, "npm")}
	return bootstrap.New(bootstrap.Options{
		CacheDir: cache, Catalog: cat, Registry: reg.Resolve, Mirror: o.Mirror, Offline: o.Offline,
		HTTPClient: o.HTTPClient, Progress: o.Progress,
	})
}
