package docker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// TestTLSEngine reaches the local Docker engine as tcp:// with mutual TLS,
// the way DOCKER_HOST=tcp://…, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY do.
// Restarting dockerd with a TLS listener is not practical inside a test, so
// a TLS-terminating proxy on 127.0.0.1 (which demands a client certificate
// signed by the test CA, as dockerd --tlsverify does) relays each
// connection to the engine's unix socket; certificates are generated here.
// A loopback tcp:// engine counts as local, so the conformance suite runs
// with bind-mounted workspaces.
func TestTLSEngine(t *testing.T) {
	engine(t)
	sock := strings.TrimPrefix(client.DefaultDockerHost, "unix://")
	pki := newTestPKI(t)
	addr := tlsProxy(t, pki.server, pki.pool, sock)
	host := "tcp://" + addr
	e := testEngine{
		endpoint: docker.Endpoint{Host: host, TLS: docker.TLSFromDir(pki.clientDir)},
		what:     "Docker engine through a TLS proxy",
		require:  testenv.RequireDockerEnv,
		setup:    "run scripts/docker-setup.sh",
		init:     "docker-init",
	}

	t.Run("Refused", func(t *testing.T) {
		ctx := context.Background()
		// A client certificate from another CA: the handshake fails.
		other := newTestPKI(t)
		_, err := docker.New(ctx, docker.Options{Host: host, TLS: &docker.TLS{CA: filepath.Join(pki.clientDir, "ca.pem"),
			Cert: filepath.Join(other.clientDir, "cert.pem"), Key: filepath.Join(other.clientDir, "key.pem")}, PingTimeout: 5 * time.Second})
		require.Error(t, err)
		assert.True(t, outposterr.Is(err, outposterr.Sandbox), "%v", err)
		// The engine's certificate is verified: another CA does not vouch for it.
		_, err = docker.New(ctx, docker.Options{Host: host, TLS: docker.TLSFromDir(other.clientDir), PingTimeout: 5 * time.Second})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate")
		// Plain HTTP to a TLS port.
		_, err = docker.New(ctx, docker.Options{Host: host, PingTimeout: 5 * time.Second})
		require.Error(t, err)
		// Missing files are a configuration error, before any dial.
		_, err = docker.New(ctx, docker.Options{Host: host, TLS: docker.TLSFromDir(t.TempDir())})
		require.Error(t, err)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		// TLS is for tcp:// only.
		_, err = docker.NewEndpointClient(docker.Endpoint{Host: "ssh://u@127.0.0.1", TLS: docker.TLSFromDir(pki.clientDir)})
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	})

	with(t, e, map[string]func(*testing.T){
		"Conformance": TestConformance,
		"KeepStdin":   TestKeepStdinOpen,
		"EngineKind":  testEngineKind("docker", true),
	})
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, the client's files laid out as DOCKER_CERT_PATH expects.
type testPKI struct {
	pool      *x509.CertPool
	server    tls.Certificate
	clientDir string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outpost test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "outpost test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return der, key
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	srvDER, srvKey := leaf(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	require.NoError(t, err)
	server, err := tls.X509KeyPair(pemOf("CERTIFICATE", srvDER), pemOf("EC PRIVATE KEY", srvKeyDER))
	require.NoError(t, err)
	cliDER, cliKey := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	cliKeyDER, err := x509.MarshalECPrivateKey(cliKey)
	require.NoError(t, err)
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"ca.pem": pemOf("CERTIFICATE", caDER), "cert.pem": pemOf("CERTIFICATE", cliDER), "key.pem": pemOf("EC PRIVATE KEY", cliKeyDER),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, server: server, clientDir: dir}
}

// tlsProxy listens on 127.0.0.1 with TLS, requires a client certificate
// from pool and relays every connection to the unix socket sock, passing
// half-closes on (an exec's stdin ends with one). It stops with the test.
func tlsProxy(t *testing.T, cert tls.Certificate, pool *x509.CertPool, sock string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				track(c, true)
				defer track(c, false)
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				track(u, true)
				defer track(u, false)
				var pipes sync.WaitGroup
				pipes.Go(func() {
					_, _ = io.Copy(u, c)
					_ = u.(*net.UnixConn).CloseWrite()
				})
				_, _ = io.Copy(c, u)
				_ = c.(*tls.Conn).CloseWrite()
				pipes.Wait()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
