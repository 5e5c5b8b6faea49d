package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Registry is the npm registry configuration bootstrap downloads from: a
// default base URL and per-scope bases ("@openai" → URL), as npm itself
// reads them from `registry=` and `@scope:registry=` settings.
type Registry struct {
	URL    string
	Scopes map[string]string
}

// For returns the registry base URL (with a trailing slash) for package pkg.
func (r Registry) For(pkg string) (string, error) {
	if scope, _, ok := strings.Cut(pkg, "/"); ok && strings.HasPrefix(scope, "@") {
		if u := r.Scopes[scope]; u != "" {
			return u, nil
		}
	}
	if r.URL == "" {
		return "", outposterr.New(outposterr.Bootstrap, "no npm registry configured for %s: %s", pkg, registryHelp)
	}
	return r.URL, nil
}

const registryHelp = "set NPM_CONFIG_REGISTRY, a registry= line in .npmrc (npm config set registry <url>), " +
	"or the outpost registry setting, or use an offline mirror directory"

// TarballURL is the conventional npm tarball location of pkg@version under
// registry base: <base><@scope>/<name>/-/<name>-<version>.tgz, where <name>
// is the package name without its scope. The registry's version document
// lists the same URL as dist.tarball for the pinned packages.
func TarballURL(base, pkg, version string) string {
	name := pkg
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		name = pkg[i+1:]
	}
	return strings.TrimSuffix(base, "/") + "/" + pkg + "/-/" + name + "-" + version + ".tgz"
}

// NPMConfig is the input from which [NPMConfig.Resolve] finds the npm
// registry. It holds values and functions instead of reading the process
// environment, so the library stays testable; the CLI fills it with
// os.Getenv, the user's home and working directories and [NPMCommand].
type NPMConfig struct {
	// Setting is an explicit Outpost registry setting; it wins over npm's.
	Setting string
	// Getenv reads environment variables (NPM_CONFIG_REGISTRY,
	// npm_config_registry, NPM_CONFIG_USERCONFIG). Nil: none are set.
	Getenv func(string) string
	// Dir is the project directory whose .npmrc is read. Empty: none.
	Dir string
	// Home is the user's home directory, whose .npmrc is the user config
	// unless NPM_CONFIG_USERCONFIG names another file. Empty: none.
	Home string
	// ReadFile reads a configuration file. Nil: os.ReadFile.
	ReadFile func(name string) ([]byte, error)
	// RunNPM returns the output of `npm config get registry`, the last
	// resort (it also covers npm's global and built-in configuration). Nil:
	// not consulted.
	RunNPM func() (string, error)
}

// Resolve finds the registry: the default base from, in order, Setting,
// NPM_CONFIG_REGISTRY / npm_config_registry, the project .npmrc, the user
// .npmrc, then `npm config get registry`; scope registries from the project
// .npmrc over the user one. Nothing configured at all is a
// [outposterr.Bootstrap] error that says how to configure one.
func (c NPMConfig) Resolve() (Registry, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	read := c.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	env := func(name string) string {
		if v := getenv(strings.ToUpper(name)); v != "" {
			return v
		}
		return getenv(strings.ToLower(name))
	}
	reg := Registry{Scopes: map[string]string{}}
	var errs []error
	set := func(source, value string) bool {
		if reg.URL != "" || value == "" {
			return reg.URL != ""
		}
		u, err := registryBase(value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			return false
		}
		reg.URL = u
		return true
	}
	set("outpost registry setting", c.Setting)
	set("NPM_CONFIG_REGISTRY", env("NPM_CONFIG_REGISTRY"))

	var files []string
	if c.Dir != "" {
		files = append(files, filepath.Join(c.Dir, ".npmrc"))
	}
	if uc := env("NPM_CONFIG_USERCONFIG"); uc != "" {
		files = append(files, uc)
	} else if c.Home != "" {
		files = append(files, filepath.Join(c.Home, ".npmrc"))
	}
	for _, f := range files {
		data, err := read(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", f, err))
			continue
		}
		def, scopes := parseNPMRC(data, getenv)
		set(f, def)
		for scope, v := range scopes {
			if _, ok := reg.Scopes[scope]; ok {
				continue // the project file came first and wins
			}
			u, err := registryBase(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s:registry: %w", f, scope, err))
				continue
			}
			reg.Scopes[scope] = u
		}
	}
	if reg.URL == "" && c.RunNPM != nil {
		out, err := c.RunNPM()
		if err != nil {
			errs = append(errs, fmt.Errorf("npm config get registry: %w", err))
		} else if v := strings.TrimSpace(out); v != "undefined" && v != "null" {
			set("npm config get registry", v)
		}
	}
	if reg.URL == "" && len(reg.Scopes) == 0 {
		return Registry{}, outposterr.Wrap(outposterr.Bootstrap,
			errors.Join(append([]error{errors.New("nothing configured")}, errs...)...),
			"find the npm registry (%s)", registryHelp)
	}
	if len(reg.Scopes) == 0 {
		reg.Scopes = nil
	}
	return reg, nil
}

// registryBase validates an http(s) registry URL and gives it a trailing slash.
func registryBase(v string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("registry %q is not an http(s) URL", shownURL(strings.TrimSpace(v)))
	}
	u.RawQuery, u.Fragment = "", ""
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u.String(), nil
}

// shownURL is u as errors and the cache's manifest show it: without its
// user information, since a registry URL may carry basic-auth credentials
// (https://user:password@host/), which authenticate requests and are never
// shown or stored. A value that does not parse as a URL with a host, yet
// may hold credentials, is not shown at all.
func shownURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Opaque != "" {
		if strings.Contains(u, "@") {
			return "(not shown: it may hold credentials)"
		}
		return u
	}
	if p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}

var envRef = regexp.MustCompile(`\$\{([^${}]+)\}`)

// parseNPMRC reads the registry settings of an .npmrc (ini syntax: key =
// value, ';' and '#' comments, optional quotes, ${VAR} expansion).
func parseNPMRC(data []byte, getenv func(string) string) (def string, scopes map[string]string) {
	scopes = map[string]string{}
	for raw := range bytes.Lines(data) {
		line := strings.TrimSpace(string(raw))
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' && value[len(value)-1] == '"' || value[0] == '\'' && value[len(value)-1] == '\'') {
			value = value[1 : len(value)-1]
		}
		value = envRef.ReplaceAllStringFunc(value, func(m string) string {
			return getenv(m[2 : len(m)-1])
		})
		switch {
		case key == "registry":
			def = value
		case strings.HasPrefix(key, "@") && strings.HasSuffix(key, ":registry"):
			scopes[strings.TrimSuffix(key, ":registry")] = value
		}
	}
	return def, scopes
}

// NPMCommand returns a [NPMConfig.RunNPM] function that runs
// `<npm> config get registry` on the host, bounded by ten seconds. An empty
// npm means "npm" from PATH.
func NPMCommand(ctx context.Context, npm string) func() (string, error) {
	if npm == "" {
		npm = "npm"
	}
	return func() (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "config", "get", "registry")
		cmd.WaitDelay = time.Second
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("run %s: %w", path.Base(npm), err)
		}
		return string(out), nil
	}
}

// clone returns a copy of r that shares no map with it.
func (r Registry) clone() Registry {
	r.Scopes = maps.Clone(r.Scopes)
	return r
}
