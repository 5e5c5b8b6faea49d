package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// flavor is the kind of engine behind the Docker-compatible API.
type flavor int

const (
	flavorDocker flavor = iota
	flavorPodman
)

func (f flavor) String() string {
	if f == flavorPodman {
		return "podman"
	}
	return "docker"
}

// detectFlavor asks the engine what it is. Podman's compatible service
// answers /_ping with a Libpod-Api-Version header (and "Server: Libpod/…").
// The SDK does not expose ping headers and Podman's /version is slow (it
// gathers the whole of `podman info`, seconds), so the probe is one raw
// HTTP/1.1 request over the client's own dialer, which works for every
// transport the client supports (unix, tcp, TLS, a connection helper).
func (p *Provider) detectFlavor(ctx context.Context) (flavor, error) {
	conn, err := dialContext(ctx, p.cli.Dialer())
	if err != nil {
		return flavorDocker, err
	}
	defer conn.Close()
	// Closing is the one way to bound every transport: a connection
	// helper's connection ignores deadlines.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if _, err := io.WriteString(conn, "GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"); err != nil {
		return flavorDocker, fmt.Errorf("ping: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(conn, 64<<10)), nil)
	if err != nil {
		return flavorDocker, fmt.Errorf("ping: %w", err)
	}
	resp.Body.Close()
	return flavorOf(resp.Header), nil
}

// flavorOf reads the engine kind from ping response headers.
func flavorOf(h http.Header) flavor {
	if h.Get("Libpod-Api-Version") != "" || strings.HasPrefix(h.Get("Server"), "Libpod") {
		return flavorPodman
	}
	return flavorDocker
}

// dialContext runs dial (which may ignore contexts) under ctx.
func dialContext(ctx context.Context, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := dial(ctx)
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
