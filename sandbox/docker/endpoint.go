package docker

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/cli/cli/connhelper"
	"github.com/docker/docker/client"

	"github.com/outpost-dev/outpost/outposterr"
)

// RootfulPodmanSocket is where a rootful Podman API service listens.
const RootfulPodmanSocket = "/run/podman/podman.sock"

// Endpoint says where a Docker-compatible engine is and how to reach it.
// The library reads no environment: the outpost command fills it from
// DOCKER_HOST, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY (or, for --sandbox
// podman, from CONTAINER_HOST and the usual socket paths).
type Endpoint struct {
	// Host is the engine address: unix:///path (also a Podman service
	// socket), tcp://host:port, or ssh://[user@]host[:port][/socket]. Empty:
	// the platform's default socket.
	Host string
	// TLS protects a tcp:// address. Nil: plain TCP.
	TLS *TLS
	// SSHFlags are extra ssh(1) arguments for an ssh:// address (an
	// identity file, "-F config"); ssh's own configuration applies as usual.
	SSHFlags []string
	// Remote declares that the engine cannot see this machine's files even
	// though its address looks local (a tcp://127.0.0.1 tunnel to another
	// host). See [Endpoint.Local].
	Remote bool
}

// TLS names the client certificate files for a tcp:// engine. The engine's
// certificate is always verified against CA (or the system roots when CA
// is empty): unlike the docker command, Outpost has no unverified mode.
type TLS struct {
	CA, Cert, Key string
}

// TLSFromDir is the docker command's layout of a certificate directory
// (DOCKER_CERT_PATH): ca.pem, cert.pem and key.pem.
func TLSFromDir(dir string) *TLS {
	return &TLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
}

// Local reports whether the engine runs on this machine and sees its files,
// so that bind mounts of this machine's paths mean what they say: a unix
// socket (Docker's, or a Podman service's) or a tcp:// address on the
// loopback, unless Remote is set. An ssh:// engine is never local, not even
// one on 127.0.0.1: what is reached through a connection helper is treated
// as another machine.
func (e Endpoint) Local() bool {
	if e.Remote {
		return false
	}
	return hostIsLocal(e.Host)
}

// hostIsLocal applies the rule of [Endpoint.Local] to an address.
func hostIsLocal(host string) bool {
	if host == "" {
		return true
	}
	proto, addr, ok := strings.Cut(host, "://")
	if !ok {
		return false
	}
	switch proto {
	case "unix", "npipe":
		return true
	case "tcp":
		u, err := url.Parse("tcp://" + addr)
		if err != nil {
			return false
		}
		h := u.Hostname()
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// NewEndpointClient returns an engine client for e that negotiates the API
// version with the engine. An ssh:// address goes through the docker
// command's connection helper: every connection is an ssh process running
// `docker system dial-stdio` on the far side, so the ssh user needs the
// docker command and access to the engine there (the ssh process inherits
// this process's environment, for SSH_AUTH_SOCK).
func NewEndpointClient(e Endpoint) (*client.Client, error) {
	host := e.Host
	if host == "" {
		host = client.DefaultDockerHost
	}
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	switch {
	case strings.HasPrefix(host, "ssh://"):
		if e.TLS != nil {
			return nil, outposterr.New(outposterr.Configuration, "docker engine %s: TLS settings apply to tcp:// addresses, not ssh://", host)
		}
		helper, err := connhelper.GetConnectionHelperWithSSHOpts(host, e.SSHFlags)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "docker engine %s", host)
		}
		opts = append(opts, client.WithHost(helper.Host), client.WithDialContext(helper.Dialer))
	case e.TLS != nil:
		if !strings.HasPrefix(host, "tcp://") {
			return nil, outposterr.New(outposterr.Configuration, "docker engine %s: TLS settings apply to tcp:// addresses", host)
		}
		for _, f := range []string{e.TLS.CA, e.TLS.Cert, e.TLS.Key} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				return nil, outposterr.Wrap(outposterr.Configuration, err, "docker engine %s: TLS file", host)
			}
		}
		opts = append(opts, client.WithHost(host), client.WithTLSClientConfig(e.TLS.CA, e.TLS.Cert, e.TLS.Key))
	default:
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "docker client for %q", host)
	}
	return cli, nil
}
