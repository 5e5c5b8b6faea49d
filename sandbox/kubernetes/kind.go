package kubernetes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// The kind's own settings (its flags).
const (
	SettingKubeconfig = "kubeconfig"
	SettingContext    = "context"
	SettingNamespace  = "namespace"
)

// Kind is the kubernetes sandbox kind: a hardened pod per lease on the
// cluster of the kubeconfig setting, else KUBECONFIG (its first entry),
// else ~/.kube/config. With Config.GatewayBinary every pod runs the model
// gateway in a sidecar container (from the image when it bakes that very
// executable in at sandbox.BakedGateway).
func Kind() sandbox.Kind {
	return sandbox.Kind{Name: "kubernetes", Summary: "a hardened pod per lease on a Kubernetes cluster (--kubeconfig)",
		Flags: []sandbox.Flag{
			{Name: SettingKubeconfig, Usage: "the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)", Reap: true},
			{Name: SettingContext, Usage: "the kubeconfig context (default: the current one)", Reap: true},
			{Name: SettingNamespace, Usage: "the namespace of the pods (default: the context's)"},
		},
		Open: open, Doctor: doctor, Reap: reap,
		ReapHelp: "pods and Secrets in every namespace the kubeconfig may list",
		GatewayHelp: func(binary bool) string {
			if binary {
				return "kubernetes pods (a gateway sidecar)"
			}
			return "kubernetes pods on this machine's network (other pods get theirs inside)"
		}}
}

// Kubeconfig is the kubeconfig file: flag when set, else $KUBECONFIG (its
// first entry), else ~/.kube/config when it exists ("": none).
func Kubeconfig(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if getenv == nil {
		return ""
	}
	if v := getenv("KUBECONFIG"); v != "" {
		first, _, _ := strings.Cut(v, string(filepath.ListSeparator))
		return first
	}
	if home := getenv("HOME"); home != "" {
		p := filepath.Join(home, ".kube", "config")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// cliDir is where a copied CLI goes in a pod: on the container's disk,
// not in the memory-backed home (which counts against the pod's memory).
const cliDir = "/tmp/outpost-cli"

func open(ctx context.Context, c sandbox.Config) (sandbox.Engine, error) {
	path := Kubeconfig(c.Settings[SettingKubeconfig], c.Getenv)
	if path == "" {
		return nil, outposterr.New(outposterr.Configuration,
			"the kubernetes sandbox needs a kubeconfig (--kubeconfig, or KUBECONFIG for the outpost command)")
	}
	if err := c.CheckUser(); err != nil {
		return nil, err
	}
	if err := c.CheckLimits(); err != nil {
		return nil, err
	}
	p, err := New(ctx, Options{Kubeconfig: path, Context: c.Settings[SettingContext],
		Namespace: c.Settings[SettingNamespace], Image: c.Image, User: c.User, Logger: c.Logger, Version: c.Version,
		CPUs: c.CPUs.Float(), MemoryBytes: c.Memory.Int(), Pids: c.Pids.Int()})
	if err != nil {
		return nil, err
	}
	return &engine{ctx: ctx, p: p, c: c}, nil
}

// engine hands out Kubernetes pods.
type engine struct {
	ctx context.Context
	p   *Provider
	c   sandbox.Config
}

// Delivery: a pod cannot mount this machine's cache; the CLI is copied in.
func (e *engine) Delivery() sandbox.Delivery {
	return sandbox.Delivery{Mode: sandbox.DeliverCopy, Dir: cliDir}
}

func (e *engine) Lease(_ *sandbox.CLI, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	return e.p, sandbox.Spec{Workspace: workspace, Network: e.c.Network, Image: e.c.Image,
		Env: map[string]string{"PATH": sandbox.BasePath}}, nil
}

// OfflineNetwork: a pod cannot go without a network; the cluster's pod
// network is the least it reaches (never the node's, which an offline
// runner's pods share). Restrict it with a NetworkPolicy.
func (e *engine) OfflineNetwork() string { return "pod" }

var _ sandbox.Unnetworked = (*engine)(nil)

// Gateway: with an outpost executable to run there, every pod gets a
// gateway sidecar, reached on the pod's loopback. Else a pod on the host's
// network (--network host) shares this machine's loopback when the
// cluster's node is this machine, and reaches the runner's gateway there;
// other pods cannot reach one.
func (e *engine) Gateway() sandbox.Route {
	switch {
	case e.c.GatewayBinary != "":
		return sandbox.Route{Via: sandbox.ViaSidecar, Sidecar: sidecars{p: e.p, binary: e.c.GatewayBinary}}
	case e.c.Network == "host" && e.p.NodeIsLocal():
		return sandbox.Route{Via: sandbox.ViaLoopback}
	}
	return sandbox.Route{}
}

func (e *engine) Close() {
	_ = leasekit.ReleaseAllWithin(e.ctx, e.p.ReleaseAll, DefaultReleaseTimeout)
	_ = e.p.Close()
}

// sidecars run the gateway binary beside each pod: the image's copy at
// sandbox.BakedGateway when it is the same file, else a copy.
type sidecars struct {
	p      *Provider
	binary string
}

func (s sidecars) WithSidecar(args []string) sandbox.Provider {
	return &sidecarProvider{p: s.p, sc: Sidecar{Binary: s.binary, Baked: sandbox.BakedGateway, Args: args}}
}

func (s sidecars) SidecarStreams(sb sandbox.Sandbox) (sandbox.SidecarStreams, bool) {
	conn, ok := SidecarStreams(sb)
	if !ok {
		return sandbox.SidecarStreams{}, false
	}
	return sandbox.SidecarStreams{Stdin: conn.Stdin, Stdout: conn.Stdout, Stderr: conn.Stderr, Started: conn.Started}, true
}

// sidecarProvider acquires pods with a sidecar.
type sidecarProvider struct {
	p  *Provider
	sc Sidecar
}

func (s *sidecarProvider) Name() string { return s.p.Name() }

func (s *sidecarProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return s.p.AcquireWithSidecar(ctx, spec, s.sc)
}

// doctor checks the cluster of $KUBECONFIG (or ~/.kube/config):
// reachable, the namespace, permission to create pods and Secrets, to
// exec and to create and renew the runner Job, the nodes' pod pids limit, and the sandbox image on a node.
// Without a kubeconfig there is nothing to check.
func doctor(ctx context.Context, c sandbox.DoctorConfig) []sandbox.Check {
	path := Kubeconfig("", c.Getenv)
	if path == "" {
		return nil
	}
	p, err := New(ctx, Options{Kubeconfig: path, Version: c.Version})
	if err != nil {
		return []sandbox.Check{{Name: "kubernetes cluster", Detail: err.Error()}}
	}
	defer p.Close()
	out := []sandbox.Check{{Name: "kubernetes cluster", OK: true, Detail: p.Server() + " namespace " + p.Namespace()}}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for _, perm := range []struct{ verb, resource, sub string }{
		{"create", "pods", ""}, {"create", "secrets", ""}, {"create", "pods", "exec"}, {"delete", "pods", ""},
		// The runner Job, which ends the pods of a runner that died.
		{"create", "jobs.batch", ""}, {"patch", "jobs.batch", ""},
	} {
		name := "kubernetes may " + perm.verb + " " + perm.resource
		if perm.sub != "" {
			name += "/" + perm.sub
		}
		ok, err := p.Can(cctx, perm.verb, perm.resource, perm.sub)
		ch := sandbox.Check{Name: name, OK: ok && err == nil, Detail: "allowed"}
		if err != nil {
			ch.Detail = err.Error()
		} else if !ok {
			ch.Detail = "denied in namespace " + p.Namespace()
		}
		out = append(out, ch)
	}
	out = append(out, podPidsChecks(cctx, p)...)
	if found, err := p.ImageOnNode(cctx, c.Image); err == nil {
		ch := sandbox.Check{Name: "kubernetes image " + c.Image, OK: found, Detail: "on a node"}
		if !found {
			ch.Detail = "on no node (import it: scripts/kube-setup.sh does for the local cluster)"
		}
		out = append(out, ch)
	}
	return out
}

// maxPidsNodes bounds the nodes whose pod pids limit doctor reads.
const maxPidsNodes = 10

// podPidsChecks reads each node's pod pids limit (the kubelet's
// podPidsLimit, through the API server): Kubernetes has no per-container
// pids limit, and a lease needs the node to limit every pod to
// DefaultPids processes (or --pids-limit N to N).
func podPidsChecks(ctx context.Context, p *Provider) []sandbox.Check {
	nodes, err := p.NodeNames(ctx)
	if err != nil {
		return []sandbox.Check{{Name: "kubernetes pod pids limit", Detail: err.Error()}}
	}
	if len(nodes) > maxPidsNodes {
		nodes = nodes[:maxPidsNodes]
	}
	var out []sandbox.Check
	for _, node := range nodes {
		c := sandbox.Check{Name: "kubernetes pod pids limit on node " + node}
		switch have, err := p.NodePidsLimit(ctx, node); {
		case err != nil:
			c.Detail = err.Error()
		case have != DefaultPids:
			c.Detail = PidsLimitMismatch(node, DefaultPids, have).Error()
		default:
			c.OK, c.Detail = true, fmt.Sprintf("%d processes and threads per pod (podPidsLimit), the default --pids-limit", have)
		}
		out = append(out, c)
	}
	return out
}

// reap removes pods and Secrets whose owning outpost process is gone, in
// every namespace the kubeconfig may list.
func reap(ctx context.Context, c sandbox.ReapConfig) ([]sandbox.Leftover, error) {
	path := Kubeconfig(c.Settings[SettingKubeconfig], c.Getenv)
	if path == "" {
		return nil, outposterr.New(outposterr.Configuration, "gc --sandbox kubernetes needs a kubeconfig (--kubeconfig or KUBECONFIG)")
	}
	p, err := New(ctx, Options{Kubeconfig: path, Context: c.Settings[SettingContext], Version: c.Version})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	left, err := p.Reap(ctx, ReapOptions{ReapOptions: sandbox.ReapOptions{DryRun: c.DryRun, Grace: c.Grace}})
	out := make([]sandbox.Leftover, 0, len(left))
	for _, l := range left {
		out = append(out, sandbox.Leftover{Removed: l.Removed, What: fmt.Sprintf("%s %s/%s (%s)", l.Kind, l.Namespace, l.Name, l.Reason)})
	}
	return out, err
}
