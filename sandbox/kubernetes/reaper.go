package kubernetes

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// The reaper exists because a lease is removed by its owner's Release, and an
// owner can die without running it: kill -9, a crash, a lost CI runner. Such
// pods keep running "sleep infinity" until their activeDeadlineSeconds. Every
// Outpost pod and Secret records which process owns it (pid, host name,
// process start time) and every pod carries a heartbeat its owner refreshes,
// so a later `outpost gc` can tell leftovers from leases of runs still going
// on, also when the owner ran on another machine.

// DefaultReapGrace is how old the heartbeat of a pod owned by another host
// (whose pid cannot be checked here) must be before [Provider.Reap] removes it: many
// missed heartbeats ([DefaultHeartbeatInterval]).
const DefaultReapGrace = 15 * time.Minute

// ReapOptions tune [Provider.Reap]. The zero value removes leftovers of dead owners on
// this host and foreign ones whose heartbeat is older than
// [DefaultReapGrace], in every namespace the client may list.
type ReapOptions struct {
	// Namespaces to search. Empty: all namespaces; if listing across
	// namespaces is forbidden, FallbackNamespace alone.
	Namespaces []string
	// FallbackNamespace is searched when listing across namespaces is
	// forbidden. Empty: [DefaultNamespace].
	FallbackNamespace string
	// DryRun, Grace (the age of a pod's heartbeat, of a Secret's
	// creation), Hostname, Now, Alive: see [sandbox.ReapOptions].
	sandbox.ReapOptions
}

// Leftover is a labelled resource found by [Provider.Reap].
type Leftover struct {
	// Kind is "pod" or "secret".
	Kind      string
	Namespace string
	Name      string
	Labels    map[string]string
	// Annotations carry the owner's full host name when it does not fit a
	// label ([AnnotationOwnerHost]).
	Annotations map[string]string
	Created     time.Time
	// Heartbeat is the pod's last heartbeat (zero for Secrets).
	Heartbeat time.Time
	// Reason says why it counts as left over.
	Reason string
	// Removed is set when Reap removed it (never in a dry run).
	Removed bool
}

// Reap finds Outpost pods and Secrets ([LabelManaged]) whose owner is gone
// and deletes them unless opts.DryRun. Resources of live owners are left
// alone. It returns every leftover found; deletion errors are joined, and a
// resource already gone counts as removed.
func (p *Provider) Reap(ctx context.Context, opts ReapOptions) ([]Leftover, error) {
	cs := p.cs
	pol := opts.policy()
	if opts.FallbackNamespace == "" {
		opts.FallbackNamespace = DefaultNamespace
	}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	sel := metav1.ListOptions{LabelSelector: LabelManaged + "=true"}
	var (
		pods    []corev1.Pod
		secrets []corev1.Secret
	)
	for _, ns := range namespaces {
		pl, err := cs.listPods(ctx, ns, sel)
		if err != nil && ns == metav1.NamespaceAll && apierrors.IsForbidden(err) {
			ns = opts.FallbackNamespace
			pl, err = cs.listPods(ctx, ns, sel)
		}
		if err != nil {
			return nil, apiError(err, "list pods")
		}
		pods = append(pods, pl.Items...)
		sl, err := cs.listSecrets(ctx, ns, sel)
		if err != nil {
			return nil, apiError(err, "list secrets")
		}
		secrets = append(secrets, sl.Items...)
	}

	var (
		out  []Leftover
		errs []error
	)
	// remove deletes a leftover (Kind "pod" or "secret") unless this is a
	// dry run, and keeps it; one already gone counts as removed.
	remove := func(lo Leftover, del metav1.DeleteOptions) {
		if !opts.DryRun {
			err := cs.delete(ctx, lo.Kind+"s", lo.Namespace, lo.Name, del)
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, apiError(err, "delete %s %s/%s", lo.Kind, lo.Namespace, lo.Name))
			} else {
				lo.Removed = true
			}
		}
		out = append(out, lo)
	}
	leasePod := map[string]bool{} // namespace/lease id -> the pod is left over
	for _, pod := range pods {
		lo := Leftover{Kind: "pod", Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations,
			Created: pod.CreationTimestamp.Time}
		if t, err := time.Parse(time.RFC3339, pod.Annotations[AnnotationHeartbeat]); err == nil {
			lo.Heartbeat = t
		}
		left := leftover(&lo, pol)
		leasePod[pod.Namespace+"/"+pod.Labels[LabelLease]] = left
		if !left {
			continue
		}
		now := int64(0)
		remove(lo, metav1.DeleteOptions{GracePeriodSeconds: &now})
	}
	for _, s := range secrets {
		lo := Leftover{Kind: "secret", Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations,
			Created: s.CreationTimestamp.Time}
		left, hasPod := leasePod[s.Namespace+"/"+s.Labels[LabelLease]]
		switch {
		case hasPod && !left:
			continue
		case hasPod:
			lo.Reason = "its pod is left over"
		case !leftover(&lo, pol):
			continue
		}
		remove(lo, metav1.DeleteOptions{})
	}
	if err := errors.Join(errs...); err != nil {
		return out, outposterr.Wrap(outposterr.Sandbox, err, "reap")
	}
	return out, nil
}

// policy is how Reap judges owners: opts with the defaults filled in. The
// host name stays whole: an owner's is its AnnotationOwnerHost when its
// label had to be cut (63 characters), else the label, which then is the
// whole name (two hosts whose names share their first 63 characters are
// not one host).
func (o ReapOptions) policy() procowner.Policy {
	pol := procowner.Policy{Grace: o.Grace, Hostname: o.Hostname, Now: o.Now, Alive: o.Alive}
	pol.Defaults(DefaultReapGrace)
	return pol
}

// leftover decides whether lo has lost its owner and sets lo.Reason. A
// pod's last sign of life is its heartbeat, else (and for Secrets) its
// creation.
func leftover(lo *Leftover, pol procowner.Policy) bool {
	host := lo.Labels[LabelOwnerHost]
	if full := lo.Annotations[AnnotationOwnerHost]; full != "" && labelValue(full) == host {
		host = full
	}
	o := leasekit.Owner(lo.Labels[LabelOwnerPID], host, lo.Labels[LabelOwnerStart], lo.Labels[LabelOwnerPIDNS])
	last := lo.Heartbeat
	if last.IsZero() {
		last = lo.Created
	}
	var left bool
	lo.Reason, left = pol.Leftover(o, last, "its last sign of life")
	return left
}
