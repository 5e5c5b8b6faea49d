package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/docker"
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

// dockerEndpoint is the engine the docker kind uses, from the docker
// command's variables: DOCKER_HOST, and for a tcp:// address
// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY (certificates in ~/.docker when
// only the latter is set). The engine's certificate is always verified.
func dockerEndpoint(f *Factory) (docker.Endpoint, error) {
	e := docker.Endpoint{Host: f.Getenv("DOCKER_HOST")}
	if !strings.HasPrefix(e.Host, "tcp://") {
		return e, nil
	}
	dir := f.Getenv("DOCKER_CERT_PATH")
	if dir == "" && f.Getenv("DOCKER_TLS_VERIFY") != "" {
		home := f.Getenv("HOME")
		if home == "" {
			return e, outposterr.New(outposterr.Configuration, "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME says where the certificates are")
		}
		dir = filepath.Join(home, ".docker")
	}
	if dir != "" {
		e.TLS = docker.TLSFromDir(dir)
	}
	return e, nil
}

// rootfulPodmanSocket is where a rootful Podman API service listens (a
// variable so tests can move it).
var rootfulPodmanSocket = docker.RootfulPodmanSocket

// podmanEndpoint finds Podman's API service: CONTAINER_HOST, else the
// rootful socket /run/podman/podman.sock, else the rootless one under
// XDG_RUNTIME_DIR — the first socket this process may connect to.
func podmanEndpoint(f *Factory) (docker.Endpoint, error) {
	if h := f.Getenv("CONTAINER_HOST"); h != "" {
		return docker.Endpoint{Host: h}, nil
	}
	candidates := []string{rootfulPodmanSocket}
	if d := f.Getenv("XDG_RUNTIME_DIR"); d != "" {
		candidates = append(candidates, filepath.Join(d, "podman", "podman.sock"))
	}
	for _, c := range candidates {
		if usableSocket(c) {
			return docker.Endpoint{Host: "unix://" + c}, nil
		}
	}
	return docker.Endpoint{}, outposterr.New(outposterr.Sandbox,
		"no Podman API service found at %s: start one (podman system service --time=0, or systemctl enable --now podman.socket) or set CONTAINER_HOST",
		strings.Join(candidates, " or "))
}
