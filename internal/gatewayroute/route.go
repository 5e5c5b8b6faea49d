// Package gatewayroute decides, turn by turn, whether a turn's credential
// goes through the model gateway and how its lease reaches it: the
// runner's own gateway (started with the first bridged turn, on a unix
// socket forwarded into container leases and on loopback TCP for the
// host), a gateway sidecar beside the lease (a Kubernetes pod), or none
// (the credential is installed in the lease). The sandbox kind says which
// through its engine's route value (sandbox.Route); this package
// acts on it, so the root package holds no routing of its own.
package gatewayroute

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Mode is where a credential that could stay outside the lease goes.
type Mode int

const (
	// Auto bridges where the lease can reach a gateway, else installs the
	// credential inside.
	Auto Mode = iota
	// Gateway requires the gateway: a lease that cannot reach one is a
	// configuration error.
	Gateway
	// Inside always installs the credential in the lease.
	Inside
)

// Router bridges the turns of one runner. It is safe for concurrent use.
type Router struct {
	// Mode says where credentials go.
	Mode Mode
	// Upstreams returns the gateway's allowlist (asked when the gateway
	// starts and for each sidecar).
	Upstreams func() []string
	// Offline is set when turns talk to the scripted server: a capped turn
	// then goes through the gateway too (harness.Bridge.Endpoint).
	Offline bool
	// Network is the network the user asked leases to have ("" : none
	// asked, so a lease that reaches the gateway by a forward gets none).
	Network string
	// Kind names the sandbox kind in errors.
	Kind   string
	Logger *slog.Logger

	mu sync.Mutex
	gw *runnerGateway
}

// runnerGateway is the runner's own gateway: a unix socket in a private
// directory for container leases and a loopback TCP listener for the host.
type runnerGateway struct {
	gw     *gateway.Gateway
	dir    string
	socket string
	tcpURL string
}

func (g *runnerGateway) close() {
	_ = g.gw.Close()
	_ = os.RemoveAll(g.dir)
}

// Close stops the runner's gateway, if one started. Idempotent.
func (r *Router) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gw != nil {
		r.gw.close()
		r.gw = nil
	}
}

// Path is how one turn reaches the model gateway, as [Router.Route]
// decided. The zero Path leaves the turn as it is: its credential goes
// inside the lease.
type Path struct {
	// Bridge is the turn's gateway (nil: none).
	Bridge *harness.Bridge
	// Provider, when set, acquires the turn's lease instead of the
	// engine's provider: the same leases, each with a gateway sidecar.
	Provider sandbox.Provider
	// Forwards are added to the lease's spec (the runner's gateway socket,
	// forwarded to the lease's loopback).
	Forwards []sandbox.Forward
	// Network, when set, is the lease's network ("none": nothing but the
	// gateway).
	Network string
}

// Apply puts p into ht.
func (p Path) Apply(ht *harness.Turn) {
	if p.Bridge != nil {
		ht.Gateway = p.Bridge
	}
	if p.Provider != nil {
		ht.Provider = p.Provider
	}
	ht.Spec.Forwards = append(ht.Spec.Forwards, p.Forwards...)
	if p.Network != "" {
		ht.Spec.Network = p.Network
	}
}

// Route decides how ht reaches a gateway: through one when its credential
// plan can be bridged and the mode and the sandbox's route allow it;
// shared is a budget the turn's grants draw on besides the turn's own caps
// (a batch's). It starts the runner's gateway on first need.
func (r *Router) Route(ht harness.Turn, route sandbox.Route, shared *gateway.Budget) (Path, error) {
	if r.Mode == Inside {
		r.Logger.Debug("credential installed inside the lease (credentials inside)")
		return Path{}, nil
	}
	// A capped turn on the offline scripted server goes through the
	// gateway as a real credential would: the caps hold where requests go.
	endpoint := r.Offline && ht.Input.Endpoint != nil &&
		(ht.Limits.MaxCostUSD > 0 || ht.Limits.MaxTokens > 0 || shared != nil)
	plan, err := ht.CredentialPlan()
	if err != nil {
		return Path{}, nil // Run's validation reports a bad plan
	}
	if plan.Bridge == nil && !endpoint {
		if len(plan.Files) > 0 || len(plan.Env) > 0 {
			r.Logger.Debug("credential installed inside the lease: the CLI refreshes this login itself, so it cannot stay outside",
				"agent", ht.Adapter.Name(), "auth", ht.Credentials.Auth.String())
		}
		return Path{}, nil
	}
	switch route.Via {
	case sandbox.ViaSidecar:
		sc := &sidecarGateway{sidecars: route.Sidecar}
		r.Logger.Debug("credential bridged through a gateway sidecar in the lease's pod", "agent", ht.Adapter.Name())
		return Path{Provider: route.Sidecar.WithSidecar(sidecarArgs(r.Upstreams())),
			Bridge: &harness.Bridge{Remote: sc.remote, Budget: shared, Endpoint: endpoint}}, nil
	case sandbox.ViaNone:
		if r.Mode == Gateway {
			return Path{}, outposterr.New(outposterr.Configuration,
				"the %s sandbox's leases cannot reach the model gateway here (an engine on another machine never can; a Kubernetes pod runs it as a sidecar with SandboxOptions.GatewayBinary, or reaches the runner's with --network host); use --credentials inside", r.Kind)
		}
		r.Logger.Debug("credential installed inside the lease: the lease cannot reach the gateway", "sandbox", r.Kind)
		return Path{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gw == nil {
		g, err := startGateway(r.Upstreams(), r.Logger)
		if err != nil {
			return Path{}, err
		}
		r.gw = g
	}
	p := Path{Bridge: &harness.Bridge{Gateway: r.gw.gw, URL: r.gw.tcpURL, Budget: shared, Endpoint: endpoint}}
	if route.Via == sandbox.ViaForward {
		// The lease reaches the gateway's socket through a forwarder on
		// its own loopback, and needs no network unless one was asked for.
		p.Forwards = []sandbox.Forward{{Socket: r.gw.socket, Port: gateway.DefaultLeasePort}}
		if r.Network == "" {
			p.Network = "none"
		}
		p.Bridge.URL = gateway.LeaseURL(gateway.DefaultLeasePort)
	}
	return p, nil
}

// sidecarArgs are the arguments of the gateway sidecar: the outpost
// command's gateway, on the pod's loopback, with the runner's upstreams.
func sidecarArgs(ups []string) []string {
	args := []string{"gateway", "sidecar", "--listen", "127.0.0.1:0"}
	for _, u := range ups {
		args = append(args, "--upstream", u)
	}
	return args
}

func startGateway(ups []string, log *slog.Logger) (*runnerGateway, error) {
	gw, err := gateway.New(gateway.Options{Upstreams: ups, Logger: log})
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "start the model gateway")
	}
	dir, err := os.MkdirTemp("", "outpost-gateway-")
	if err != nil {
		_ = gw.Close()
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "gateway socket directory")
	}
	g := &runnerGateway{gw: gw, dir: dir, socket: filepath.Join(dir, "gateway.sock")}
	if err := gw.ListenUnix(g.socket); err != nil {
		g.close()
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "start the model gateway")
	}
	if g.tcpURL, err = gw.ListenTCP("127.0.0.1:0"); err != nil {
		g.close()
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "start the model gateway")
	}
	return g, nil
}

// sidecarGateway is a turn's gateway sidecar: the control client of the
// gateway beside its lease, started once per lease.
type sidecarGateway struct {
	sidecars sandbox.Sidecars

	mu     sync.Mutex
	lease  string // the lease the fields below are about
	client *gateway.Remote
	url    string
	err    error // the sidecar did not start
}

// sidecarReady bounds the wait for the gateway sidecar's announcement.
const sidecarReady = 30 * time.Second

// remote returns the control client of sb's gateway sidecar, started once
// per lease.
func (s *sidecarGateway) remote(ctx context.Context, sb sandbox.Sandbox) (*gateway.Remote, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == sb.ID() {
		return s.client, s.url, s.err
	}
	conn, ok := s.sidecars.SidecarStreams(sb)
	if !ok {
		return nil, "", outposterr.New(outposterr.Sandbox, "lease %s has no gateway sidecar", sb.ID())
	}
	if conn.Started != nil {
		// The program's start (checked in the image or copied in) is
		// bounded by the provider; sidecarReady bounds the gateway's own
		// start after it. No request reaches the gateway before Ready
		// has seen it listen: the grant, and the CLI, come after.
		if err := conn.Started(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, "", err
			}
			s.lease = sb.ID()
			s.err = outposterr.Wrap(outposterr.Sandbox, err, "the gateway sidecar of pod %s did not start", sb.ID())
			return nil, "", s.err
		}
	}
	c := gateway.NewRemote(conn.Stdout, conn.Stdin)
	rctx, cancel := context.WithTimeout(ctx, sidecarReady)
	defer cancel()
	urls, err := c.Ready(rctx)
	if err == nil && len(urls) == 0 {
		err = errors.New("it serves no address")
	}
	s.lease = sb.ID()
	if err != nil {
		// Remembered: the streams have one reader, and a later attempt
		// of the turn fails the same way.
		s.err = outposterr.Wrap(outposterr.Sandbox, err, "the gateway sidecar of pod %s did not start (%s)",
			sb.ID(), strings.TrimSpace(conn.Stderr()))
		return nil, "", s.err
	}
	s.client, s.url = c, urls[0]
	return c, s.url, nil
}
