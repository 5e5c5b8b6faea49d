package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// Defaults of [Options].
const (
	// DefaultImage is [sandbox.DefaultImage], the image built from
	// .outpost/Dockerfile; it must be on the nodes or pullable by them.
	DefaultImage = sandbox.DefaultImage
	// DefaultUser is the sandbox user: [sandbox.DefaultUser], the base
	// image's "agent" account. Kubernetes leases never run as root.
	DefaultUser = sandbox.DefaultUser
	// DefaultNamespace is used when neither Options nor the kubeconfig
	// context name one.
	DefaultNamespace = "default"
	// DefaultPingTimeout bounds the API server probe in [New],
	// DefaultOpTimeout each short API call (create, get, patch, delete, the
	// signalling exec), DefaultReleaseTimeout cleanup in Release.
	DefaultPingTimeout    = leasekit.DefaultPingTimeout
	DefaultOpTimeout      = leasekit.DefaultOpTimeout
	DefaultReleaseTimeout = leasekit.DefaultReleaseTimeout
	// DefaultStartTimeout bounds the wait for a new pod to run (scheduling,
	// image pull, container start).
	DefaultStartTimeout = 5 * time.Minute
	// DefaultLifetime is the pod's activeDeadlineSeconds: the backstop that
	// ends a lease whose owner vanished without anyone running `outpost gc`.
	DefaultLifetime = 24 * time.Hour
	// DefaultRunnerGrace is how long the leases of a process that died
	// (even by SIGKILL) outlive it before the cluster deletes them (see
	// [Options.RunnerGrace]).
	DefaultRunnerGrace = 30 * time.Second
	// DefaultHeartbeatInterval is how often a live lease refreshes
	// [AnnotationHeartbeat].
	DefaultHeartbeatInterval = time.Minute
	// DefaultHomeBytes is the size limit of the memory-backed home.
	DefaultHomeBytes = 1 << 30
	// DefaultCPUs, DefaultMemoryBytes and DefaultPids are the limits of
	// every lease unless Options or Spec set others: [sandbox.DefaultCPUs]
	// and friends, the Docker provider's too, so a turn gets the same
	// bounds on either kind.
	DefaultCPUs        = sandbox.DefaultCPUs
	DefaultMemoryBytes = sandbox.DefaultMemoryBytes
	DefaultPids        = sandbox.DefaultPids
	// DefaultCPURequest and DefaultMemoryRequestBytes are what a lease
	// asks the scheduler for (capped at its limits): small, so a 2-core
	// node runs several leases at once; the limits above are what a lease
	// may use.
	DefaultCPURequest               = 0.05
	DefaultMemoryRequestBytes int64 = 256 << 20
	// DefaultTmpBytes and DefaultWorkspaceBytes are the size limits of the
	// disk-backed /tmp (the copied CLI, caches) and workspace volumes: the
	// container's root filesystem is read-only, so they and the home are
	// all a lease can write.
	DefaultTmpBytes       int64 = 4 << 30
	DefaultWorkspaceBytes int64 = 10 << 30
	// ephemeralSlackBytes is the pod's disk use besides its volumes
	// (container logs, the sidecar's volume) in the default
	// ephemeral-storage limit.
	ephemeralSlackBytes int64 = 1 << 30
	// ephemeralRequestBytes is the ephemeral-storage request (capped at
	// the limit).
	ephemeralRequestBytes int64 = 1 << 30
	// DefaultMaxSyncBytes bounds what one workspace sync may bring back.
	DefaultMaxSyncBytes = 4 << 30
	// DefaultQPS and DefaultBurst are the client's API rate limits.
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Fixed paths inside every lease.
const (
	// Home is the private, memory-backed home directory of the sandbox user.
	Home = "/home/agent"
	// Root is the workspace directory and default working directory.
	Root = "/workspace"
	// Tmp is the writable /tmp volume.
	Tmp = "/tmp"
	// containerName is the lease's only container.
	containerName = "lease"
)

// apiHint is appended to errors that mean the API server cannot be used.
const apiHint = "is the cluster up and the kubeconfig right?"

// Options configure a [Provider]. Every field is optional except a way to
// reach the cluster (Kubeconfig or RestConfig); the zero value of each is
// described on the field. The library reads no environment variables: the
// CLI resolves KUBECONFIG and flags and passes them here.
type Options struct {
	// Kubeconfig is the path of the kubeconfig file.
	Kubeconfig string
	// Context is the kubeconfig context to use. Empty: its current context.
	Context string
	// RestConfig is a client configuration to use instead of Kubeconfig.
	RestConfig *rest.Config
	// Namespace holds the leases' pods and Secrets. Empty: the context's
	// namespace, else [DefaultNamespace].
	Namespace string
	// Image is the default container image. Empty: [DefaultImage].
	Image string
	// PullPolicy is the pods' image pull policy. Empty: IfNotPresent.
	PullPolicy corev1.PullPolicy
	// ImagePullSecrets name Secrets of the namespace used to pull the image.
	ImagePullSecrets []string
	// User is the default "uid:gid" (never uid 0). Empty: [DefaultUser].
	User string
	// Network is the default network: "pod" (or "bridge", the same: the
	// cluster's pod network) or "host" (the node's network namespace, for a
	// server on the node's loopback). Empty: "pod".
	Network string
	// CPUs and MemoryBytes are the lease container's limits (a CPU quota
	// in cores; memory, which the memory-backed home counts against) when
	// Spec leaves them zero. Zero: [DefaultCPUs], [DefaultMemoryBytes];
	// negative: no limit.
	CPUs        float64
	MemoryBytes int64
	// Pids is the pod pids limit leases need when Spec leaves it zero.
	// Kubernetes has no per-container pids limit: the node's kubelet limits
	// every pod (podPidsLimit), so the provider reads the kubelet's
	// configuration of the node each pod runs on and refuses the lease
	// (a configuration error) when that node's limit differs, or when it
	// cannot be read. Zero: [DefaultPids]; negative: no limit needed, not
	// checked.
	Pids int64
	// CPURequest and MemoryRequestBytes are the lease container's
	// requests, capped at its limits. Zero: [DefaultCPURequest],
	// [DefaultMemoryRequestBytes].
	CPURequest         float64
	MemoryRequestBytes int64
	// EphemeralStorageBytes is the limit of the pod's disk use (the /tmp
	// and workspace volumes, logs). Zero: TmpBytes + WorkspaceBytes + 1
	// GiB; negative: none.
	EphemeralStorageBytes int64
	// HomeBytes is the size limit of the memory-backed home (it counts
	// against the memory limit). Zero: [DefaultHomeBytes].
	HomeBytes int64
	// TmpBytes and WorkspaceBytes are the size limits of the /tmp and
	// workspace volumes (disk-backed; the kubelet evicts a pod that
	// exceeds one). Zero: [DefaultTmpBytes], [DefaultWorkspaceBytes].
	TmpBytes, WorkspaceBytes int64
	// NodeSelector, Tolerations, RuntimeClassName and PriorityClassName are
	// copied into every pod (placement on a many-node cluster; a sandboxing
	// runtime such as gVisor or Kata through its RuntimeClass).
	NodeSelector      map[string]string
	Tolerations       []corev1.Toleration
	RuntimeClassName  string
	PriorityClassName string
	// Version is the value of [LabelVersion]. Empty: "dev".
	Version string
	// RunID is the value of [LabelRun] on every resource. Empty: a random id.
	RunID string
	// Logger receives debug records about API calls. Nil: discarded.
	Logger *slog.Logger
	// PingTimeout bounds the probe in [New]. Zero: [DefaultPingTimeout].
	PingTimeout time.Duration
	// OpTimeout bounds each short API call; streams are bounded by the
	// caller's context instead. Zero: [DefaultOpTimeout].
	OpTimeout time.Duration
	// StartTimeout bounds the wait for a new pod to run. Zero:
	// [DefaultStartTimeout].
	StartTimeout time.Duration
	// ReleaseTimeout bounds cleanup in Release. Zero: [DefaultReleaseTimeout].
	ReleaseTimeout time.Duration
	// Lifetime is the pods' activeDeadlineSeconds. Zero: [DefaultLifetime].
	Lifetime time.Duration
	// RunnerGrace is how long the leases of a provider whose process died
	// without releasing them (kill -9, a crash, a lost machine) live on:
	// the provider's runner Job (batch/v1, in Namespace; the kubeconfig
	// user needs to create, patch and delete Jobs there) owns its pods,
	// and the cluster deletes it, and them, when the provider stops
	// renewing it for that long. Zero: [DefaultRunnerGrace]; negative: no
	// runner Job (leases live until Release, `outpost gc` or Lifetime).
	RunnerGrace time.Duration
	// HeartbeatInterval is how often a lease refreshes
	// [AnnotationHeartbeat]. Zero: [DefaultHeartbeatInterval]; negative: never.
	HeartbeatInterval time.Duration
	// MaxSyncBytes bounds the bytes one workspace sync brings back to the
	// host. Zero: [DefaultMaxSyncBytes].
	MaxSyncBytes int64
	// QPS and Burst are the client's API rate limits (when the provider
	// builds the client). Zero: [DefaultQPS], [DefaultBurst].
	QPS   float32
	Burst int
}

// Provider hands out Kubernetes pod leases. It is safe for concurrent use.
type Provider struct {
	cfg   *rest.Config
	cs    *client
	ns    string
	opts  Options
	log   *slog.Logger
	owner procowner.Owner
	klog  logr.Logger // client-go's logger (see logging.go)

	mu     sync.Mutex
	leases leasekit.Tracker[*lease]
	// nodePids caches each node's pod pids limit (-1: none) once read.
	nodePids map[string]int64
	// runner is the Job that owns the provider's pods (see lifeline.go).
	runner runnerJob
	// sums caches the SHA-256 of sidecar programs (see fileSum).
	sums map[fileKey]string
}

var _ sandbox.Provider = (*Provider)(nil)

// New connects to the cluster and checks that the API server answers within
// Options.PingTimeout. An unreachable API server is an [outposterr.Sandbox]
// error; a missing or broken kubeconfig is a configuration error.
func New(ctx context.Context, opts Options) (*Provider, error) {
	opts = opts.withDefaults()
	switch opts.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, outposterr.New(outposterr.Configuration, "image pull policy %q is not Always, IfNotPresent or Never", opts.PullPolicy)
	}
	if _, _, err := parseUser(opts.User); err != nil {
		return nil, err
	}
	if _, err := hostNetwork(opts.Network); err != nil {
		return nil, err
	}
	if err := sandbox.CheckCPUs(opts.CPUs); err != nil {
		return nil, err
	}
	if opts.HomeBytes < 0 || opts.TmpBytes < 0 || opts.WorkspaceBytes < 0 || opts.CPURequest < 0 || opts.MemoryRequestBytes < 0 {
		return nil, outposterr.New(outposterr.Configuration, "negative volume size or resource request")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, ns, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	cfg.WarningHandler = warningLogger{log}
	cs, err := newClient(cfg)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "kubernetes client")
	}
	p := &Provider{cfg: cfg, cs: cs, ns: ns, opts: opts, log: log, owner: procowner.Self(), klog: clientLogger(log),
		nodePids: map[string]int64{}}
	pctx, cancel := context.WithTimeout(p.withLogger(ctx), opts.PingTimeout)
	defer cancel()
	if err := cs.version(pctx); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reach kubernetes API server: %w", ctx.Err())
		}
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "kubernetes API server unreachable at %s (%s)", cfg.Host, apiHint)
	}
	log.Debug("kubernetes provider ready", "server", cfg.Host, "namespace", ns)
	return p, nil
}

// withDefaults fills in the zero fields of o.
func (o Options) withDefaults() Options {
	o.Image = cmp.Or(o.Image, DefaultImage)
	o.PullPolicy = cmp.Or(o.PullPolicy, corev1.PullIfNotPresent)
	o.User = cmp.Or(o.User, DefaultUser)
	o.Network = cmp.Or(o.Network, "pod")
	o.Version = cmp.Or(o.Version, "dev")
	o.RunID = cmp.Or(o.RunID, uuid.NewString())
	o.PingTimeout = cmp.Or(o.PingTimeout, DefaultPingTimeout)
	o.OpTimeout = cmp.Or(o.OpTimeout, DefaultOpTimeout)
	o.StartTimeout = cmp.Or(o.StartTimeout, DefaultStartTimeout)
	o.ReleaseTimeout = cmp.Or(o.ReleaseTimeout, DefaultReleaseTimeout)
	o.Lifetime = cmp.Or(o.Lifetime, DefaultLifetime)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, DefaultHeartbeatInterval)
	o.RunnerGrace = cmp.Or(o.RunnerGrace, DefaultRunnerGrace)
	o.HomeBytes = cmp.Or(o.HomeBytes, DefaultHomeBytes)
	o.CPURequest = cmp.Or(o.CPURequest, DefaultCPURequest)
	o.MemoryRequestBytes = cmp.Or(o.MemoryRequestBytes, DefaultMemoryRequestBytes)
	o.TmpBytes = cmp.Or(o.TmpBytes, DefaultTmpBytes)
	o.WorkspaceBytes = cmp.Or(o.WorkspaceBytes, DefaultWorkspaceBytes)
	o.EphemeralStorageBytes = cmp.Or(o.EphemeralStorageBytes, o.TmpBytes+o.WorkspaceBytes+ephemeralSlackBytes)
	o.MaxSyncBytes = cmp.Or(o.MaxSyncBytes, DefaultMaxSyncBytes)
	o.QPS = cmp.Or(o.QPS, DefaultQPS)
	o.Burst = cmp.Or(o.Burst, DefaultBurst)
	return o
}

// restConfig builds the client configuration and picks the namespace.
func restConfig(opts Options) (*rest.Config, string, error) {
	var cfg *rest.Config
	ns := opts.Namespace
	switch {
	case opts.RestConfig != nil:
		cfg = rest.CopyConfig(opts.RestConfig)
	case opts.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.Kubeconfig}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opts.Context})
		c, err := cc.ClientConfig()
		if err != nil {
			return nil, "", outposterr.Wrap(outposterr.Configuration, err, "load kubeconfig %s", opts.Kubeconfig)
		}
		cfg = c
		if ns == "" {
			if n, _, err := cc.Namespace(); err == nil {
				ns = n
			}
		}
	default:
		return nil, "", outposterr.New(outposterr.Configuration, "no kubeconfig given (set KUBECONFIG or pass --kubeconfig)")
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.UserAgent = "outpost/" + opts.Version
	return cfg, cmp.Or(ns, DefaultNamespace), nil
}

var userRE = regexp.MustCompile(`^([0-9]{1,10}):([0-9]{1,10})$`)

// parseUser validates "uid:gid" and refuses root: pods run with runAsNonRoot.
func parseUser(s string) (uid, gid int64, err error) {
	m := userRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, outposterr.New(outposterr.Configuration, "sandbox user %q is not uid:gid", s)
	}
	uid, err1 := strconv.ParseInt(m[1], 10, 64)
	gid, err2 := strconv.ParseInt(m[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, outposterr.Wrap(outposterr.Configuration, err, "sandbox user %q", s)
	}
	if uid == 0 {
		return 0, 0, outposterr.New(outposterr.Configuration, "sandbox user %q is root: kubernetes leases run as a non-root user", s)
	}
	if gid == 0 {
		return 0, 0, outposterr.New(outposterr.Configuration, "sandbox user %q is in the root group (gid 0): give a non-zero gid", s)
	}
	return uid, gid, nil
}

// hostNetwork maps a network name to the pod's hostNetwork field.
func hostNetwork(n string) (bool, error) {
	switch n {
	case "", "pod", "bridge":
		return false, nil
	case "host":
		return true, nil
	}
	return false, outposterr.New(outposterr.Configuration,
		"network %q is not available for kubernetes leases (pod or host; restrict a pod's traffic with a NetworkPolicy)", n)
}

// Name implements [sandbox.Provider].
func (p *Provider) Name() string { return "kubernetes" }

// Namespace is where the provider creates its pods and Secrets.
func (p *Provider) Namespace() string { return p.ns }

// Server is the API server's address.
func (p *Provider) Server() string { return p.cfg.Host }

// NodeIsLocal reports whether the cluster runs on this machine: its API
// server is on the loopback (a one-node cluster such as
// scripts/kube-setup.sh's), so a pod on the host's network shares this
// machine's loopback.
func (p *Provider) NodeIsLocal() bool {
	u, err := url.Parse(p.cfg.Host)
	if err != nil || u.Hostname() == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// Close stops the background work of the live leases (pod watches and
// heartbeats) without releasing them, for a caller that gives up on a
// cluster it cannot reach any more; see [Provider.ReleaseAll] to remove them.
// The leases' own calls fail afterwards only if the cluster does. Close
// also deletes the provider's runner Job (see [Options.RunnerGrace]), and
// with it the pods of leases not released yet: a lease does not outlive
// its provider.
func (p *Provider) Close() error {
	for _, l := range p.leases.All() {
		l.cancel()
	}
	p.endRunnerJob()
	return nil
}

// opCtx derives the short deadline used for control calls.
func (p *Provider) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.withLogger(ctx), p.opts.OpTimeout)
}

// Live returns the ids (pod names) of the leases acquired and not yet released.
func (p *Provider) Live() []string { return p.leases.Live() }

// ReleaseAll releases every live lease of p concurrently and joins the
// errors. It is what a signal handler calls before the process exits; each
// Release is bounded by Options.ReleaseTimeout even if ctx is cancelled.
func (p *Provider) ReleaseAll(ctx context.Context) error { return p.leases.ReleaseAll(ctx) }

// apiError classifies a failed API call: unreachable servers and server-side
// failures are sandbox errors, refusals (forbidden, invalid, quota) are
// configuration errors.
func apiError(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return outposterr.Wrap(outposterr.Configuration, err, "%s: not allowed (check the kubeconfig user's permissions)", msg)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return outposterr.Wrap(outposterr.Configuration, err, "%s", msg)
	case isUnreachable(err):
		return outposterr.Wrap(outposterr.Sandbox, err, "%s: kubernetes API server unreachable (%s)", msg, apiHint)
	}
	return outposterr.Wrap(outposterr.Sandbox, err, "%s", msg)
}

// isUnreachable reports errors that mean no answer came from the API server.
func isUnreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := err.(apierrors.APIStatus); ok || errors.As(err, new(apierrors.APIStatus)) {
		return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	s := err.Error()
	for _, m := range []string{"connection refused", "no such host", "i/o timeout", "connection reset", "EOF",
		"context deadline exceeded", "network is unreachable", "broken pipe", "TLS handshake"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Can reports whether the provider's credentials may do verb on resource
// (and subresource, "" for none) in its namespace (a SelfSubjectAccessReview).
// A resource of an API group is named resource.group ("jobs.batch").
func (p *Provider) Can(ctx context.Context, verb, resource, subresource string) (bool, error) {
	resource, group, _ := strings.Cut(resource, ".")
	r, err := p.cs.accessReview(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: p.ns, Verb: verb, Group: group, Resource: resource, Subresource: subresource}},
	})
	if err != nil {
		return false, outposterr.Wrap(outposterr.Sandbox, err, "ask the API server what outpost may do")
	}
	return r.Status.Allowed, nil
}

// ImageOnNode reports whether some node reports image among its images
// (an image reference as pods name it; a registry-less name also matches
// its docker.io/library and localhost forms).
func (p *Provider) ImageOnNode(ctx context.Context, image string) (bool, error) {
	nodes, err := p.cs.listNodes(ctx)
	if err != nil {
		return false, outposterr.Wrap(outposterr.Sandbox, err, "list nodes")
	}
	want := map[string]bool{image: true, "docker.io/" + image: true, "docker.io/library/" + image: true, "localhost/" + image: true}
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if want[name] {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
