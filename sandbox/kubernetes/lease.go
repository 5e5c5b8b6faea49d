package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// watchFailures is how many consecutive failed watch attempts (with backoff,
// about six seconds) make a starting lease give up: the API server is gone.
const watchFailures = 5

// lease is one pod; it implements [sandbox.Sandbox].
type lease struct {
	// TarCopy is CopyIn and CopyOut: tar in the pod.
	leasekit.TarCopy[*process]

	p         *Provider
	leaseID   string
	name      string // pod name
	secret    string // Secret holding Spec.Env, "" when there is none
	user      string
	workspace string // host directory synced with Root, "" when there is none
	// hide are workspace-relative directories (Spec.Hide) never copied in
	// and never written back: the pod neither sees nor plants them.
	hide []string
	// sidecar is the pod's sidecar program (nil: none) and sidecarConn its
	// streams once it runs.
	sidecar     *Sidecar
	sidecarConn *SidecarConn

	ctx    context.Context // lives until Release: the watch and the heartbeat
	cancel context.CancelFunc

	mu        sync.Mutex
	pod       *corev1.Pod // last seen state
	failures  int         // consecutive failed watch attempts
	watchErr  error       // the last of them
	changed   chan struct{}
	gone      chan struct{} // closed when the pod was deleted or ended
	goneErr   error
	watchDone chan struct{}
	pidsSeen  int64 // the refused-fork count last read (see pidsLimitReached)

	rel leasekit.ReleaseState

	syncMu sync.Mutex
	known  map[string]bool // workspace paths the pod had at the last sync
	// syncRunner, when set (tests), runs a sync script in place of an exec
	// in the pod.
	syncRunner func(ctx context.Context, script string, stdin io.Reader, apply func(io.Reader) error) error
}

var _ sandbox.Sandbox = (*lease)(nil)

func newLease(p *Provider, leaseID, user, workspace string) *lease {
	ctx, cancel := context.WithCancel(p.withLogger(context.Background()))
	l := &lease{
		p:         p,
		leaseID:   leaseID,
		name:      "outpost-" + leaseID[:16],
		user:      user,
		workspace: workspace,
		ctx:       ctx,
		cancel:    cancel,
		changed:   make(chan struct{}),
		gone:      make(chan struct{}),
	}
	l.Start = l.startTar
	return l
}

// ID implements [sandbox.Sandbox]: the pod name.
func (l *lease) ID() string { return l.name }

// Home implements [sandbox.Sandbox].
func (l *lease) Home() string { return Home }

// Root implements [sandbox.Sandbox].
func (l *lease) Root() string { return Root }

// startWatch follows the pod until Release: every change is recorded, and a
// pod that is deleted or ends closes l.gone, which fails every process of
// the lease at once (a deleted pod never hangs a turn).
func (l *lease) startWatch(created *corev1.Pod) {
	l.mu.Lock()
	l.pod = created
	l.watchDone = make(chan struct{})
	l.mu.Unlock()
	go l.watchLoop(created.ResourceVersion)
}

func (l *lease) watchLoop(rv string) {
	defer close(l.watchDone)
	sel := fields.OneTermEqualSelector("metadata.name", l.name).String()
	backoff := 200 * time.Millisecond
	for l.ctx.Err() == nil {
		if rv == "" {
			// Start over from the current state.
			gctx, cancel := l.p.opCtx(l.ctx)
			pod, err := l.p.cs.getPod(gctx, l.p.ns, l.name)
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				l.update(nil)
				return
			case err != nil:
				l.watchFailed(err)
				if !sleepCtx(l.ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			l.update(pod)
			rv = pod.ResourceVersion
		}
		w, err := l.p.cs.watchPods(l.ctx, l.p.ns, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
				continue
			}
			l.watchFailed(err)
			if !sleepCtx(l.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		l.watchOK()
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					rv = pod.ResourceVersion
					l.update(pod)
				}
			case watch.Bookmark:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					rv = pod.ResourceVersion
				}
			case watch.Deleted:
				l.update(nil)
				w.Stop()
				return
			case watch.Error:
				rv = "" // most often "too old resource version": start over
			}
		}
		w.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// notify wakes everyone waiting on l.changed; l.mu must be held.
func (l *lease) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *lease) watchFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures++
	l.watchErr = err
	l.notify()
}

func (l *lease) watchOK() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures, l.watchErr = 0, nil
}

// update records the pod's state (nil: deleted) and closes l.gone when the
// pod is deleted or has ended.
func (l *lease) update(pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pod != nil {
		l.pod = pod
	}
	l.failures, l.watchErr = 0, nil
	if reason := goneReason(l.name, pod); reason != "" && l.goneErr == nil {
		l.goneErr = outposterr.New(outposterr.Sandbox, "%s", reason)
		close(l.gone)
	}
	l.notify()
}

// goneReason says why pod can no longer run commands, or "".
func goneReason(name string, pod *corev1.Pod) string {
	switch {
	case pod == nil:
		return "pod " + name + " was deleted"
	case pod.DeletionTimestamp != nil:
		return "pod " + name + " is being deleted"
	case pod.Status.Phase == corev1.PodFailed:
		switch pod.Status.Reason {
		case "Evicted":
			return "pod " + name + " was evicted: " + pod.Status.Message
		case "DeadlineExceeded":
			return "pod " + name + " reached its lifetime (activeDeadlineSeconds)"
		}
		return "pod " + name + " failed: " + podProblem(pod)
	case pod.Status.Phase == corev1.PodSucceeded:
		return "pod " + name + " ended: its main container exited"
	}
	return ""
}

// Gone implements [sandbox.Vanishing]: the pod was deleted, evicted or
// ended while the lease was held, or its sidecar program failed to start or
// ended. "" while it runs, once Release started,
// or when the API server does not answer.
func (l *lease) Gone(ctx context.Context) string {
	if l.rel.Releasing() || l.rel.Released() {
		return ""
	}
	if err := l.goneError(); err != nil {
		return err.Error()
	}
	if l.sidecarConn != nil {
		// A pod whose sidecar (the model gateway) failed or ended serves
		// no turn: a pool drops it, a failed turn is the sandbox's.
		if why := l.sidecarConn.failure(); why != "" {
			return "pod " + l.name + ": " + why
		}
	}
	// The watch may not have seen it yet: ask.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	pod, err := l.p.cs.getPod(gctx, l.p.ns, l.name)
	switch {
	case apierrors.IsNotFound(err):
		return goneReason(l.name, nil)
	case err != nil:
		return ""
	}
	return goneReason(l.name, pod)
}

// goneError is the error of the ended pod, nil while it lives.
func (l *lease) goneError() error {
	select {
	case <-l.gone:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.goneErr
	default:
		return nil
	}
}

// running reports whether every container of the pod (the lease's, and
// the sidecar's when there is one) runs.
func running(pod *corev1.Pod) bool {
	if pod == nil || pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return len(pod.Status.ContainerStatuses) > 0
}

// startFailure returns the reason a pending pod will not start by itself,
// or "" while it may still start.
func startFailure(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s exited (%s, exit %d): %s", cs.Name, t.Reason, t.ExitCode, strings.TrimSpace(t.Message))
		}
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImageNeverPull":
			return fmt.Sprintf("image %s is not on the node and the pull policy forbids pulling it (load it into the node's runtime, or use pull policy IfNotPresent with a registry)", cs.Image)
		case "InvalidImageName":
			return fmt.Sprintf("image name %s is invalid", cs.Image)
		case "ImagePullBackOff":
			return fmt.Sprintf("image %s cannot be pulled: %s", cs.Image, w.Message)
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
			if kubeletCatchingUp(w.Message) {
				continue
			}
			return fmt.Sprintf("container cannot start: %s: %s", w.Reason, w.Message)
		}
	}
	return ""
}

// kubeletCatchingUp reports whether a container's configuration error is
// the kubelet not having synced the lease's secret (or a config map) yet,
// which it retries by itself: a busy node reports "failed to sync secret
// cache: timed out waiting for the condition" for a secret created just
// before the pod. The start timeout still bounds the wait.
func kubeletCatchingUp(msg string) bool {
	return strings.Contains(msg, "failed to sync secret cache") || strings.Contains(msg, "failed to sync configmap cache")
}

// podProblem describes why a pod is not running, for messages.
func podProblem(pod *corev1.Pod) string {
	if pod == nil {
		return "no pod state seen"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("pod unschedulable: %s", cmp.Or(c.Message, c.Reason))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			return fmt.Sprintf("container waiting: %s %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container exited (%s, exit %d)", t.Reason, t.ExitCode)
		}
	}
	msg := "phase " + string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		msg += ": " + pod.Status.Reason
	}
	if pod.Status.Message != "" {
		msg += ": " + pod.Status.Message
	}
	return msg
}

// waitRunning waits, bounded by Options.StartTimeout, until the pod runs,
// and classifies why it does not: unschedulable, image missing, container
// cannot start, deleted, evicted, API server unreachable.
func (l *lease) waitRunning(ctx context.Context) error {
	timer := time.NewTimer(l.p.opts.StartTimeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		pod, failures, werr, changed := l.pod, l.failures, l.watchErr, l.changed
		l.mu.Unlock()
		if err := l.goneError(); err != nil {
			return outposterr.Wrap(outposterr.Sandbox, err, "start pod %s", l.name)
		}
		if running(pod) {
			return nil
		}
		if reason := startFailure(pod); reason != "" {
			return outposterr.New(outposterr.Sandbox, "start pod %s: %s", l.name, reason)
		}
		if failures >= watchFailures {
			return outposterr.Wrap(outposterr.Sandbox, werr, "start pod %s: kubernetes API server unreachable (%s)", l.name, apiHint)
		}
		select {
		case <-changed:
		case <-timer.C:
			return outposterr.New(outposterr.Sandbox, "start pod %s: not running after %s: %s", l.name, l.p.opts.StartTimeout, podProblem(pod))
		case <-ctx.Done():
			return fmt.Errorf("start pod %s: %w", l.name, ctx.Err())
		}
	}
}

// startHeartbeat refreshes AnnotationHeartbeat until Release.
func (l *lease) startHeartbeat() {
	if l.p.opts.HeartbeatInterval < 0 {
		return
	}
	go func() {
		t := time.NewTicker(l.p.opts.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-l.gone:
				return
			case now := <-t.C:
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationHeartbeat, now.UTC().Format(time.RFC3339))
				ctx, cancel := l.p.opCtx(l.ctx)
				err := l.p.cs.mergePatch(ctx, "pods", l.p.ns, l.name, []byte(patch))
				cancel()
				if err != nil {
					l.p.log.Debug("heartbeat", "pod", l.name, "err", err)
				}
			}
		}
	}()
}

// Release implements [sandbox.Sandbox]: it deletes the pod (no grace
// period: the lease's processes are killed) and the Secret. It runs under
// context.WithoutCancel with Options.ReleaseTimeout, treats "not found" as
// success and joins errors. A failed Release can be retried; a successful
// one makes later calls no-ops. The host workspace is kept.
func (l *lease) Release(ctx context.Context) error {
	return l.rel.Release(func() error { return l.release(ctx) })
}

// release deletes the pod and the Secret and ends the lease's watches; see
// Release.
func (l *lease) release(ctx context.Context) error {
	if l.sidecarConn != nil {
		_ = l.sidecarConn.Stdin.Close() // the sidecar program's end of input
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.opts.ReleaseTimeout)
	defer cancel()
	var errs []error
	now := int64(0)
	bg := metav1.DeletePropagationBackground
	err := l.p.cs.delete(ctx, "pods", l.p.ns, l.name, metav1.DeleteOptions{GracePeriodSeconds: &now, PropagationPolicy: &bg})
	switch {
	case err == nil:
		l.p.log.Debug("pod deleted", "pod", l.name)
	case apierrors.IsNotFound(err):
		l.p.log.Debug("pod already gone", "pod", l.name)
	default:
		errs = append(errs, apiError(err, "delete pod %s", l.name))
	}
	if l.secret != "" {
		err := l.p.cs.delete(ctx, "secrets", l.p.ns, l.secret, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, apiError(err, "delete secret %s", l.secret))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.cancel()
	l.mu.Lock()
	if l.goneErr == nil {
		l.goneErr = outposterr.New(outposterr.Sandbox, "pod %s was released", l.name)
		close(l.gone)
	}
	l.notify()
	l.mu.Unlock()
	l.p.leases.Untrack(l)
	return nil
}

// releasedError is the error of work asked of a released lease.
func (l *lease) releasedError(what string) error {
	return outposterr.New(outposterr.Sandbox, "%s: lease %s was released", what, l.name)
}
