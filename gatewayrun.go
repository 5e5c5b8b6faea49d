package outpost

import (
	"os"
	"path/filepath"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
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

// gatewayBridger is implemented by sandbox engines whose leases can reach
// the runner's gateway: bridge adapts the lease spec and returns the
// gateway's URL as the lease sees it.
type gatewayBridger interface {
	// bridge returns ok false when this lease cannot reach the gateway.
	bridge(spec *sandbox.Spec, g *runnerGateway, userNetwork string) (url string, ok bool)
}

// upstreams is the gateway's allowlist: the model APIs the built-in
// adapters use, the endpoints the project declares, the scripted server.
func (r *Runner) upstreams() []string {
	ups := []string{claude.DefaultBaseURL, codex.DefaultBaseURL}
	for _, k := range []string{claude.BaseURLVar, copilot.BaseURLVar} {
		if v := r.creds.Vars[k]; v != "" {
			if k == copilot.BaseURLVar {
				v = trimV1(v)
			}
			ups = append(ups, v)
		}
	}
	if r.srv != nil {
		ups = append(ups, r.srv.URL())
	}
	return ups
}

func trimV1(u string) string {
	for len(u) > 0 && u[len(u)-1] == '/' {
		u = u[:len(u)-1]
	}
	if len(u) > 3 && u[len(u)-3:] == "/v1" {
		u = u[:len(u)-3]
	}
	return u
}

// bridge puts the runner's gateway in front of ht's credential when its
// plan can be bridged and the mode and sandbox allow it.
func (r *Runner) bridge(ht *harness.Turn) error {
	if ht.Credentials == nil {
		return nil
	}
	if r.opts.Credentials == CredentialsInside {
		r.logger.Debug("credential installed inside the lease (credentials inside)")
		return nil
	}
	a, ok := ht.Adapter.(adapters.Authenticator)
	if !ok {
		return nil
	}
	plan, err := a.Credentials(ht.Credentials.Auth, ht.Credentials.Vars)
	if err != nil {
		return nil // Validate reports a bad plan
	}
	if plan.Bridge == nil {
		if len(plan.Files) > 0 || len(plan.Env) > 0 {
			r.logger.Debug("credential installed inside the lease: the CLI refreshes this login itself, so it cannot stay outside",
				"agent", ht.Adapter.Name(), "auth", ht.Credentials.Auth.String())
		}
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.engine.(gatewayBridger)
	if ok && r.gw == nil {
		g, err := startGateway(r.upstreams(), r)
		if err != nil {
			return err
		}
		r.gw = g
	}
	var url string
	if ok {
		url, ok = b.bridge(&ht.Spec, r.gw, r.opts.Sandbox.Network)
	}
	if !ok {
		if r.opts.Credentials == CredentialsGateway {
			return outposterr.New(outposterr.Configuration,
				"the %s sandbox's leases cannot reach the model gateway here (a pod reaches it with --network host); use --credentials inside", r.kind.Name)
		}
		r.logger.Debug("credential installed inside the lease: the lease cannot reach the gateway", "sandbox", r.kind.Name)
		return nil
	}
	ht.Gateway = &harness.Bridge{Gateway: r.gw.gw, URL: url}
	return nil
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

// bridge: a container lease reaches the gateway's socket through a
// forwarder on its own loopback, and needs no network unless the user asked
// for one.
func (e *dockerEngine) bridge(spec *sandbox.Spec, g *runnerGateway, userNetwork string) (string, bool) {
	spec.Forwards = append(spec.Forwards, sandbox.Forward{Socket: g.socket, Port: gateway.DefaultLeasePort})
	if userNetwork == "" {
		spec.Network = "none"
	}
	return gateway.LeaseURL(gateway.DefaultLeasePort), true
}

// bridge: the host sandbox reaches the gateway on loopback TCP.
func (e *hostEngine) bridge(_ *sandbox.Spec, g *runnerGateway, _ string) (string, bool) {
	return g.tcpURL, true
}

// bridge: a pod on the host's network (--network host, hostNetwork) shares
// this machine's loopback when the cluster's node is this machine, and
// reaches the gateway's loopback listener there; other pods cannot reach
// it, and their credentials go inside.
func (e *kubeEngine) bridge(_ *sandbox.Spec, g *runnerGateway, _ string) (string, bool) {
	if e.o.Network != "host" || !e.p.NodeIsLocal() {
		return "", false
	}
	return g.tcpURL, true
}
