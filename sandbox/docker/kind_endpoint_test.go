package docker

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestDockerEndpointFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	e, err := DockerEndpoint(env())
	require.NoError(t, err)
	assert.Equal(t, Endpoint{}, e)
	assert.True(t, e.Local())

	e, err = DockerEndpoint(env("DOCKER_HOST", "ssh://me@build-box", "DOCKER_CERT_PATH", "/certs"))
	require.NoError(t, err)
	assert.Nil(t, e.TLS, "TLS settings apply to tcp:// only")
	assert.False(t, e.Local())

	e, err = DockerEndpoint(env("DOCKER_HOST", "tcp://10.1.2.3:2376", "DOCKER_CERT_PATH", "/certs", "DOCKER_TLS_VERIFY", "1"))
	require.NoError(t, err)
	assert.Equal(t, &TLS{CA: "/certs/ca.pem", Cert: "/certs/cert.pem", Key: "/certs/key.pem"}, e.TLS)
	assert.False(t, e.Local(), "tcp:// to another host")

	e, err = DockerEndpoint(env("DOCKER_HOST", "tcp://127.0.0.1:2376", "DOCKER_TLS_VERIFY", "1", "HOME", "/home/me"))
	require.NoError(t, err)
	assert.Equal(t, "/home/me/.docker/ca.pem", e.TLS.CA)
	assert.True(t, e.Local(), "tcp:// on the loopback")

	_, err = DockerEndpoint(env("DOCKER_HOST", "tcp://127.0.0.1:2376", "DOCKER_TLS_VERIFY", "1"))
	assert.True(t, outposterr.Is(err, outposterr.Configuration))

	e, err = DockerEndpoint(env("DOCKER_HOST", "tcp://127.0.0.1:2375"))
	require.NoError(t, err)
	assert.Nil(t, e.TLS)
}

func TestPodmanEndpoint(t *testing.T) {
	dir := t.TempDir()
	old := rootfulPodmanSocket
	rootfulPodmanSocket = filepath.Join(dir, "rootful.sock")
	t.Cleanup(func() { rootfulPodmanSocket = old })
	xdg := filepath.Join(dir, "xdg")
	require.NoError(t, os.MkdirAll(filepath.Join(xdg, "podman"), 0o700))
	f := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	_, err := PodmanEndpoint(f(map[string]string{"XDG_RUNTIME_DIR": xdg}))
	require.Error(t, err, "no socket")
	assert.True(t, outposterr.Is(err, outposterr.Sandbox))
	assert.Contains(t, err.Error(), "podman system service")

	listen := func(path string) {
		ln, err := net.Listen("unix", path)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
	}
	listen(filepath.Join(xdg, "podman", "podman.sock"))
	e, err := PodmanEndpoint(f(map[string]string{"XDG_RUNTIME_DIR": xdg}))
	require.NoError(t, err)
	assert.Equal(t, "unix://"+filepath.Join(xdg, "podman", "podman.sock"), e.Host, "the rootless socket")

	listen(rootfulPodmanSocket)
	e, err = PodmanEndpoint(f(map[string]string{"XDG_RUNTIME_DIR": xdg}))
	require.NoError(t, err)
	assert.Equal(t, "unix://"+rootfulPodmanSocket, e.Host, "the rootful socket first")

	e, err = PodmanEndpoint(f(map[string]string{"XDG_RUNTIME_DIR": xdg, "CONTAINER_HOST": "ssh://me@box/run/podman/podman.sock"}))
	require.NoError(t, err)
	assert.Equal(t, "ssh://me@box/run/podman/podman.sock", e.Host, "CONTAINER_HOST wins")
	assert.False(t, e.Local())
}
