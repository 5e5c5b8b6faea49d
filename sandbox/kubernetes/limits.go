package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// NoPidsLimit is what [Provider.NodePidsLimit] reports for a node whose
// kubelet does not limit the processes of its pods.
const NoPidsLimit int64 = -1

// NodePidsLimit reads the pod pids limit (podPidsLimit) of node's kubelet
// configuration through the API server (nodes/NAME/proxy/configz; the
// caller needs "get" on nodes/proxy). A node whose address is on this
// machine's loopback, which the API server refuses to proxy to ("address
// not allowed"; the single-node cluster of scripts/kube-setup.sh), is asked
// directly, with the kubeconfig's credentials and certificate authority:
// its kubelet must serve a certificate of the cluster's CA. [NoPidsLimit]
// when the node does not limit pods. A refusal is a configuration error;
// an API server or kubelet that does not answer a sandbox error.
func (p *Provider) NodePidsLimit(ctx context.Context, node string) (int64, error) {
	return cached(&p.mu, &p.nodePids, node, func() (int64, error) {
		cctx, cancel := p.opCtx(ctx)
		defer cancel()
		body, err := p.cs.nodeConfigz(cctx, node)
		if err != nil && apierrors.IsBadRequest(err) && strings.Contains(err.Error()+string(body), "address not allowed") {
			var derr error
			body, derr = p.localConfigz(cctx, node)
			if derr != nil {
				err = fmt.Errorf("%w; asking its kubelet directly: %w", err, derr)
			} else {
				err = nil
			}
		}
		if err != nil {
			what := fmt.Sprintf("read the kubelet configuration of node %s (nodes/%s/proxy/configz)", node, node)
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) || errors.As(err, new(*tlsError)) {
				return 0, outposterr.Wrap(outposterr.Configuration, err, "%s", what)
			}
			return 0, apiError(err, "%s", what)
		}
		n, err := parsePodPidsLimit(body)
		if err != nil {
			return 0, outposterr.Wrap(outposterr.Sandbox, err, "kubelet configuration of node %s", node)
		}
		return n, nil
	})
}

// cached returns (*m)[key], read under mu, else what compute returns, which
// it stores unless compute fails. compute runs without mu held: two callers
// may compute the same value at once, the last one stored stays.
func cached[K comparable, V any](mu *sync.Mutex, m *map[K]V, key K, compute func() (V, error)) (V, error) {
	mu.Lock()
	v, ok := (*m)[key]
	mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := compute()
	if err != nil {
		return v, err
	}
	mu.Lock()
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[key] = v
	mu.Unlock()
	return v, nil
}

// NodeNames lists the cluster's nodes, sorted.
func (p *Provider) NodeNames(ctx context.Context) ([]string, error) {
	cctx, cancel := p.opCtx(ctx)
	defer cancel()
	nodes, err := p.cs.listNodes(cctx)
	if err != nil {
		return nil, apiError(err, "list nodes")
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// parsePodPidsLimit reads podPidsLimit from a kubelet's /configz answer;
// absent or not positive: [NoPidsLimit] (the kubelet's default is -1).
func parsePodPidsLimit(body []byte) (int64, error) {
	var cz struct {
		KubeletConfig *struct {
			PodPidsLimit *int64 `json:"podPidsLimit"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(body, &cz); err != nil {
		return 0, fmt.Errorf("decode /configz: %w", err)
	}
	if cz.KubeletConfig == nil {
		return 0, errors.New("/configz holds no kubeletconfig")
	}
	if cz.KubeletConfig.PodPidsLimit == nil || *cz.KubeletConfig.PodPidsLimit <= 0 {
		return NoPidsLimit, nil
	}
	return *cz.KubeletConfig.PodPidsLimit, nil
}

// tlsError marks a kubelet whose certificate the kubeconfig's authority
// does not vouch for.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// localConfigz reads /configz from the kubelet of a node on this machine's
// loopback, verifying its certificate against the kubeconfig's authority
// and authenticating as the kubeconfig's user (the kubelet asks the API
// server whether that user may get nodes/proxy).
func (p *Provider) localConfigz(ctx context.Context, node string) ([]byte, error) {
	if !p.NodeIsLocal() {
		return nil, errors.New("the API server is not on this machine")
	}
	n, err := p.cs.getNode(ctx, node)
	if err != nil {
		return nil, err
	}
	host := ""
	for _, a := range n.Status.Addresses {
		if (a.Type == corev1.NodeHostName || a.Type == corev1.NodeInternalIP) && loopback(a.Address) {
			host = a.Address
			break
		}
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if host == "" || port <= 0 {
		return nil, errors.New("the node has no loopback address and kubelet port")
	}
	cfg := rest.CopyConfig(p.cfg)
	cfg.Host = (&url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}).String()
	cfg.APIPath, cfg.Timeout = "", 10*time.Second
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/configz", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "certificate") {
			return nil, &tlsError{fmt.Errorf("%w (the kubelet must serve a certificate of the cluster's CA: re-run scripts/kube-setup.sh)", err)}
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, "get", corev1.Resource("nodes/proxy"), node,
			strings.TrimSpace(string(body)), 0, false)
	}
	return body, nil
}

// loopback reports whether a node address is this machine's loopback.
func loopback(addr string) bool {
	if addr == "localhost" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

// checkPids makes sure the node a lease's pod runs on limits pods to want
// processes (want 0: no limit needed).
func (p *Provider) checkPids(ctx context.Context, node string, want int64) error {
	if want <= 0 {
		return nil
	}
	have, err := p.NodePidsLimit(ctx, node)
	if err != nil {
		if outposterr.Is(err, outposterr.Configuration) {
			return outposterr.Wrap(outposterr.Configuration, err,
				"the kubernetes sandbox cannot tell whether node %s limits pods to %d processes (--pids-limit): allow reading nodes/proxy, or pass --pids-limit 0 to run without a pids limit",
				node, want)
		}
		return err
	}
	if have == want {
		return nil
	}
	return PidsLimitMismatch(node, want, have)
}

// PidsLimitMismatch is the configuration error of a pids limit that node's
// pod pids limit (have; [NoPidsLimit]: none) does not apply.
func PidsLimitMismatch(node string, want, have int64) error {
	if have == NoPidsLimit {
		return outposterr.New(outposterr.Configuration,
			"the kubernetes sandbox cannot apply a pids limit of %d (--pids-limit): node %s does not limit the processes of its pods; set podPidsLimit: %d in its kubelet configuration (scripts/kube-setup.sh does), or pass --pids-limit 0 to run without a pids limit",
			want, node, want)
	}
	return outposterr.New(outposterr.Configuration,
		"the kubernetes sandbox cannot apply a pids limit of %d (--pids-limit): node %s limits each pod to %d processes (the kubelet's podPidsLimit); pass --pids-limit %d, or change podPidsLimit",
		want, node, have, have)
}

// nodeName is the node the lease's pod runs on.
func (l *lease) nodeName() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pod == nil {
		return ""
	}
	return l.pod.Spec.NodeName
}

// oomKilled reports whether the memory limit killed the lease's container.
func (l *lease) oomKilled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return oomKilled(l.pod)
}

// oomKilled reports whether the lease's container of pod was killed for
// memory (its current or last termination).
func oomKilled(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != containerName {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.Reason == "OOMKilled" {
				return true
			}
		}
	}
	return false
}

// pidsReadTries bounds the attempts to read the refused-fork count.
const pidsReadTries = 6

var _ sandbox.LimitReporter = (*process)(nil)

// LimitsReached implements [sandbox.LimitReporter]: [sandbox.LimitPids]
// when the container's count of forks refused at the pod's pids limit rose
// since the lease last looked. (A process killed for memory is reported by
// its exit status: [sandbox.ExitStatus.OOMKilled].)
func (p *process) LimitsReached(ctx context.Context) []string {
	if p.l.pidsLimitReached(ctx) {
		return []string{sandbox.LimitPids}
	}
	return nil
}

// pidsLimitReached reports whether the refused-fork count rose since the
// lease last looked (a fresh container's is 0). Near the limit the exec
// that reads it may itself fail to start; a few more tries get through
// once processes exit.
func (l *lease) pidsLimitReached(ctx context.Context) bool {
	var n int64 = -1
	var err error
	for try, wait := 0, 100*time.Millisecond; try < pidsReadTries; try, wait = try+1, wait*2 {
		if try > 0 && !sleepCtx(ctx, wait) {
			break
		}
		n, err = leasekit.ReadCounter(ctx, l.quick, leasekit.PidsCounter)
		if err == nil || l.goneError() != nil {
			break
		}
	}
	if err != nil || n < 0 {
		l.p.log.Debug("pids counter", "pod", l.name, "count", n, "err", err)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rose := n > l.pidsSeen
	l.pidsSeen = max(n, l.pidsSeen)
	return rose
}
