package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/outpost-dev/outpost"
)

// kindOrDefault is the sandbox kind --sandbox names ("": the default).
func kindOrDefault(name string) string {
	if name == "" {
		return outpost.DefaultSandbox
	}
	return name
}

// sandboxNames lists the kinds for help and errors.
func (f *Factory) sandboxNames() string { return strings.Join(outpost.SandboxNames(f.Sandboxes), ", ") }

// hostEnv is the environment the host sandbox passes to CLIs: the few
// variables a program needs to run, never the whole environment (which holds
// secrets the caller did not choose to forward).
func hostEnv(f *Factory) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TMPDIR", "TERM"} {
		if v := f.Getenv(k); v != "" {
			env[k] = v
		}
	}
	env["TZ"] = "UTC"
	return env
}

// kubeconfig is the kubeconfig file: --kubeconfig, else $KUBECONFIG (its
// first entry), else ~/.kube/config when it exists.
func kubeconfig(f *Factory, flag string) string {
	if flag != "" {
		return flag
	}
	if v := f.Getenv("KUBECONFIG"); v != "" {
		first, _, _ := strings.Cut(v, string(filepath.ListSeparator))
		return first
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".kube", "config")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
