package kubernetes

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A lease must not outlive the process that holds it, even one killed with
// SIGKILL, which runs no cleanup, and nothing in a pod can see whether that
// process lives (it has no credentials, and the API server would not tell).
// So the provider makes the cluster do it, with two things it has built in:
//
//   - the runner Job: on its first Acquire, the provider creates a Job that
//     never runs a pod (parallelism 0), with an active deadline a short
//     grace ([Options.RunnerGrace]) ahead and ttlSecondsAfterFinished 0.
//     While the provider lives it pushes the deadline forward every sixth
//     of the grace. When it stops (its process died), the deadline passes,
//     the Job controller fails the Job and the TTL controller deletes it;
//   - owner references: every pod of the provider names the runner Job as
//     an owner, and the pod owns its Secret, so the garbage collector
//     deletes both once the Job is gone.
//
// From the runner's death to its pods' deletion: the grace (30 s by
// default), then seconds. The deadline is counted on this process's
// clock from just before the Job was created, so a clock that differs from
// the API server's moves nothing; a runner that cannot reach the API
// server for longer than the grace loses its leases.

// runnerJob is a provider's runner Job, made on the first Acquire.
type runnerJob struct {
	mu     sync.Mutex
	job    *batchv1.Job // nil until created
	warned bool         // a failure to create it was logged
	stop   context.CancelFunc
	done   chan struct{}
}

// runnerJobPrefix starts the name of every runner Job.
const runnerJobPrefix = "outpost-runner-"

// runnerOwner returns the owner reference a new pod names: the runner
// Job, created on first use; nil when the provider runs without one
// (RunnerGrace negative) or cannot create it (the error is logged once:
// the lease then lives until Release, `outpost gc` or Options.Lifetime).
func (p *Provider) runnerOwner(ctx context.Context) []metav1.OwnerReference {
	if p.opts.RunnerGrace < 0 {
		return nil
	}
	r := &p.runner
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.job == nil {
		if err := p.createRunnerJob(ctx); err != nil {
			if !r.warned {
				r.warned = true
				p.log.Warn("leases will not end by themselves if this process dies: cannot create the runner Job (outpost gc removes them)",
					"namespace", p.ns, "err", err)
			}
			return nil
		}
	}
	return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: r.job.Name, UID: r.job.UID}}
}

// createRunnerJob creates the runner Job and starts renewing its
// deadline; p.runner.mu is held.
func (p *Provider) createRunnerJob(ctx context.Context) error {
	r := &p.runner
	labels, annotations := p.labels(nil, "")
	delete(labels, LabelLease)
	uid, gid, err := parseUser(p.opts.User)
	if err != nil {
		return err
	}
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	never := int32(0)
	one := int32(1)
	zero := int32(0)
	deadline := graceSeconds(p.opts.RunnerGrace)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      runnerJobPrefix + strings.ReplaceAll(uuid.NewString(), "-", "")[:16],
			Namespace: p.ns, Labels: labels, Annotations: ownerAnnotations(annotations),
		},
		Spec: batchv1.JobSpec{
			// It never runs a pod: it only holds a deadline.
			Parallelism:             &never,
			Completions:             &one,
			BackoffLimit:            &zero,
			ActiveDeadlineSeconds:   &deadline,
			TTLSecondsAfterFinished: &zero,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: new(false),
				SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: new(true), SeccompProfile: seccomp},
				Containers: []corev1.Container{{
					Name: "never-runs", Image: p.opts.Image, Command: []string{"true"},
					SecurityContext: containerSecurity(uid, gid, seccomp),
				}},
			}},
		},
	}
	start := time.Now().Round(0) // wall clock
	cctx, cancel := p.opCtx(context.WithoutCancel(ctx))
	created, err := p.cs.createJob(cctx, p.ns, job)
	cancel()
	if err != nil {
		return apiError(err, "create runner job")
	}
	p.log.Debug("runner job created", "job", created.Name, "namespace", p.ns, "grace", p.opts.RunnerGrace)
	r.job = created
	rctx, stop := context.WithCancel(p.withLogger(context.Background()))
	r.stop, r.done = stop, make(chan struct{})
	go p.renewRunnerJob(rctx, created.Name, start, r.done)
	return nil
}

// graceSeconds is d in whole seconds, rounded up, at least 1.
func graceSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// runnerDeadline is the runner Job's activeDeadlineSeconds that ends it a
// grace after now, counted from start (the wall clock just before the Job
// was created, so never after the Job's own start time).
func runnerDeadline(start, now time.Time, grace time.Duration) int64 {
	return graceSeconds(now.Sub(start)) + graceSeconds(grace)
}

// renewRunnerJob pushes the runner Job's deadline forward until ctx ends.
func (p *Provider) renewRunnerJob(ctx context.Context, name string, start time.Time, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(max(p.opts.RunnerGrace/6, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ads := runnerDeadline(start, time.Now().Round(0), p.opts.RunnerGrace)
		patch := fmt.Sprintf(`{"spec":{"activeDeadlineSeconds":%d}}`, ads)
		cctx, cancel := p.opCtx(ctx)
		err := p.cs.patchJob(cctx, p.ns, name, []byte(patch))
		cancel()
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			// Deleted (by its deadline, after this process could not
			// renew it, or by someone): its leases are going too. The
			// next Acquire makes a new one.
			p.log.Warn("the runner job is gone: its leases are deleted with it", "job", name)
			p.runner.mu.Lock()
			if p.runner.job != nil && p.runner.job.Name == name {
				p.runner.job = nil
			}
			p.runner.mu.Unlock()
			return
		case ctx.Err() == nil:
			p.log.Debug("renew runner job", "job", name, "err", err)
		}
	}
}

// endRunnerJob stops the renewals and deletes the runner Job (leases not
// released yet are deleted with it).
func (p *Provider) endRunnerJob() {
	r := &p.runner
	r.mu.Lock()
	job, stop, done := r.job, r.stop, r.done
	r.job, r.stop, r.done = nil, nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	if job == nil {
		return
	}
	ctx, cancel := p.opCtx(context.Background())
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if err := p.cs.deleteJob(ctx, p.ns, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		p.log.Debug("delete runner job", "job", job.Name, "err", err)
	}
}
