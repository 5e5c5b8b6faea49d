package outpost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// runnerGateway is the model gateway of a runner, started with its first
// bridged turn: a unix socket in a private directory for container leases
// and a loopback TCP listener for the host sandbox.
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

// upstreams is the gateway's allowlist: the model APIs the registered
// agents' CLIs use given the project's variables (each adapter declares its
// own, [adapters.Upstreamer]), and the scripted server.
func (r *Runner) upstreams() []string {
	ups := r.table.Registry.Upstreams(r.creds.Vars)
	if r.srv != nil {
		ups = append(ups, r.srv.URL())
	}
	return ups
}

// bridge puts the runner's gateway in front of ht's credential when its
// plan can be bridged and the mode and sandbox allow it.
func (r *Runner) bridge(ht *harness.Turn, shared *gateway.Budget) error {
	if r.opts.Credentials == CredentialsInside {
		r.logger.Debug("credential installed inside the lease (credentials inside)")
		return nil
	}
	// A capped turn on the offline scripted server goes through the
	// gateway as a real credential would: the caps hold where requests go.
	endpoint := r.srv != nil && ht.Input.Endpoint != nil &&
		(ht.Limits.MaxCostUSD > 0 || ht.Limits.MaxTokens > 0 || shared != nil)
	var plan credentials.Plan
	if a, ok := ht.Adapter.(adapters.Authenticator); ok && ht.Credentials != nil {
		p, err := a.Credentials(ht.Credentials.Auth, ht.Credentials.Vars)
		if err != nil {
			return nil // Validate reports a bad plan
		}
		plan = p
	}
	if plan.Bridge == nil && !endpoint {
		if len(plan.Files) > 0 || len(plan.Env) > 0 {
			r.logger.Debug("credential installed inside the lease: the CLI refreshes this login itself, so it cannot stay outside",
				"agent", ht.Adapter.Name(), "auth", ht.Credentials.Auth.String())
		}
		return nil
	}
	route := r.engine.Gateway()
	if route.Via == sandbox.ViaSidecar {
		sc := &sidecarGateway{sidecars: route.Sidecar}
		ht.Provider = route.Sidecar.WithSidecar(sidecarArgs(r.upstreams()))
		ht.Gateway = &harness.Bridge{Remote: sc.remote, Budget: shared, Endpoint: endpoint}
		r.logger.Debug("credential bridged through a gateway sidecar in the lease's pod", "agent", ht.Adapter.Name())
		return nil
	}
	if route.Via == sandbox.ViaNone {
		if r.opts.Credentials == CredentialsGateway {
			return outposterr.New(outposterr.Configuration,
				"the %s sandbox's leases cannot reach the model gateway here (a pod runs it as a sidecar with SandboxOptions.GatewayBinary, or reaches the runner's with --network host); use --credentials inside", r.kind.Name)
		}
		r.logger.Debug("credential installed inside the lease: the lease cannot reach the gateway", "sandbox", r.kind.Name)
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gw == nil {
		g, err := startGateway(r.upstreams(), r)
		if err != nil {
			return err
		}
		r.gw = g
	}
	url := r.gw.tcpURL
	if route.Via == sandbox.ViaForward {
		// The lease reaches the gateway's socket through a forwarder on
		// its own loopback, and needs no network unless one was asked for.
		ht.Spec.Forwards = append(ht.Spec.Forwards, sandbox.Forward{Socket: r.gw.socket, Port: gateway.DefaultLeasePort})
		if r.opts.Sandbox.Network == "" {
			ht.Spec.Network = "none"
		}
		url = gateway.LeaseURL(gateway.DefaultLeasePort)
	}
	ht.Gateway = &harness.Bridge{Gateway: r.gw.gw, URL: url, Budget: shared, Endpoint: endpoint}
	return nil
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

func startGateway(ups []string, r *Runner) (*runnerGateway, error) {
	gw, err := gateway.New(gateway.Options{Upstreams: ups, Logger: r.logger})
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
