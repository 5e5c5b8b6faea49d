package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// startScript is the container's main process: it notes whether env can
// reset ignored signals (the exec wrapper then uses it), creates the private
// home with mode 0700 inside the memory-backed volume (a volume's own root
// cannot be given a mode) and sleeps. The pod shares its process namespace,
// so the pause process is PID 1 and reaps orphans.
const startScript = `if env --default-signal=INT,QUIT true 2>/dev/null; then : >/tmp/.outpost-envds; fi
mkdir -p -m 0700 "$1"
exec sleep infinity`

// Acquire creates a pod for spec and waits until it runs. See the package
// documentation for what the pod looks like.
func (p *Provider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return p.acquire(ctx, spec, nil)
}

// acquire is Acquire, with a sidecar when sc is set.
func (p *Provider) acquire(ctx context.Context, spec sandbox.Spec, sc *Sidecar) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire kubernetes sandbox: %w", err)
	}
	image := cmp.Or(spec.Image, p.opts.Image)
	useHost, err := hostNetwork(cmp.Or(spec.Network, p.opts.Network))
	if err != nil {
		return nil, err
	}
	user := cmp.Or(spec.User, p.opts.User)
	uid, gid, err := parseUser(user)
	if err != nil {
		return nil, err
	}
	for k, v := range spec.Env {
		if !sandbox.ValidEnvName(k) {
			return nil, outposterr.New(outposterr.Configuration, "invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, outposterr.New(outposterr.Configuration, "environment variable %s holds a NUL byte", k)
		}
	}
	if spec.CPUs < 0 || spec.MemoryBytes < 0 || spec.Pids < 0 {
		return nil, outposterr.New(outposterr.Configuration, "negative resource limit")
	}
	if err := sandbox.CheckCPUs(spec.CPUs); err != nil {
		return nil, err
	}
	if len(spec.Forwards) > 0 {
		return nil, outposterr.New(outposterr.Configuration,
			"kubernetes leases cannot reach this machine's unix sockets (%s): run the gateway as a sidecar or service", spec.Forwards[0].Socket)
	}
	var hide []string
	for _, h := range spec.Hide {
		c := path.Clean(filepath.ToSlash(h))
		if c == "." || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return nil, outposterr.New(outposterr.Configuration, "hidden directory %q must be inside the workspace", h)
		}
		hide = append(hide, c)
	}
	if len(spec.Mounts) > 0 {
		return nil, outposterr.New(outposterr.Configuration,
			"kubernetes leases have no host mounts (%s): copy files in with CopyIn", spec.Mounts[0].Source)
	}
	workspace, err := leasekit.WorkspaceDir(spec.Workspace)
	if err != nil {
		return nil, err
	}

	leaseID := strings.ReplaceAll(uuid.NewString(), "-", "")
	l := newLease(p, leaseID, user, workspace)
	l.hide = hide
	l.sidecar = sc
	labels, annotations := p.labels(spec.Labels, leaseID)
	if len(spec.Env) > 0 {
		l.secret = l.name + "-env"
	}
	pod, err := p.podFor(l, spec, image, useHost, uid, gid, labels, annotations)
	if err != nil {
		return nil, err
	}
	// The runner Job owns the pod (and the Secret until the pod adopts
	// it): they die with this process.
	owners := p.runnerOwner(ctx)
	pod.OwnerReferences = owners

	// Create calls are never abandoned half-way (a request cut off by
	// cancellation can still complete in the API server and leak the
	// object); they run to completion and cancellation is checked after.
	bctx := context.WithoutCancel(ctx)
	if l.secret != "" {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: l.secret, Namespace: p.ns, Labels: labels, Annotations: ownerAnnotations(annotations),
				OwnerReferences: owners},
			Type:      corev1.SecretTypeOpaque,
			Immutable: new(true),
			Data:      map[string][]byte{},
		}
		for k, v := range spec.Env {
			sec.Data[k] = []byte(v)
		}
		cctx, cancel := p.opCtx(bctx)
		err := p.cs.createSecret(cctx, p.ns, sec)
		cancel()
		if err != nil {
			return nil, apiError(err, "create secret %s", l.secret)
		}
		p.leases.Track(l)
	}
	cctx, cancel := p.opCtx(bctx)
	created, err := p.cs.createPod(cctx, p.ns, pod)
	cancel()
	if err != nil {
		return nil, errors.Join(apiError(err, "create pod %s", l.name), l.Release(ctx))
	}
	p.leases.Track(l)
	p.log.Debug("pod created", "pod", l.name, "namespace", p.ns, "image", image, "host_network", useHost, "user", user)
	l.startWatch(created)
	if l.secret != "" {
		// The pod owns its Secret: if the pod is deleted by anyone, the
		// cluster's garbage collector deletes the Secret too.
		l.adoptSecret(bctx, created.UID)
	}
	if ctx.Err() != nil {
		return nil, errors.Join(fmt.Errorf("create pod: %w", ctx.Err()), l.Release(ctx))
	}
	if err := l.waitRunning(ctx); err != nil {
		return nil, errors.Join(err, l.Release(ctx))
	}
	// The sidecar starts while the lease is checked and filled, and goes
	// on after the lease is returned (its streams wait for it): under the
	// lease's context, so Release stops it.
	if sc != nil {
		l.sidecarConn = newSidecarConn()
		go func() {
			run, err := l.startSidecar(l.ctx)
			if err != nil {
				l.p.log.Debug("sidecar not started", "pod", l.name, "err", err)
			}
			l.sidecarConn.finish(run, err)
		}()
	}
	err = p.checkPids(ctx, l.nodeName(), p.leaseResources(spec).Pids)
	if err == nil && workspace != "" {
		err = l.copyWorkspaceIn(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, l.Release(ctx))
	}
	l.startHeartbeat()
	return l, nil
}

// labels builds the labels and annotations of a lease's resources.
func (p *Provider) labels(callerLabels map[string]string, leaseID string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range callerLabels {
		setLabel(labels, annotations, labelKey(k), v)
	}
	host := labelValue(p.owner.Host)
	labels[LabelOwnerPID] = strconv.Itoa(p.owner.PID)
	labels[LabelOwnerHost] = host
	if host != p.owner.Host {
		annotations[AnnotationOwnerHost] = p.owner.Host
	}
	if p.owner.Start != "" {
		labels[LabelOwnerStart] = p.owner.Start
	}
	if ns := leasekit.PIDNamespace(); ns != "" {
		labels[LabelOwnerPIDNS] = ns
	}
	if labels[LabelRun] == "" && annotations[LabelRun] == "" {
		setLabel(labels, annotations, LabelRun, p.opts.RunID)
	}
	labels[LabelManaged] = "true"
	setLabel(labels, annotations, LabelVersion, p.opts.Version)
	labels[LabelLease] = leaseID
	labels[LabelCreated] = strconv.FormatInt(time.Now().Unix(), 10)
	return labels, annotations
}

// ownerAnnotations is the part of annotations that identifies the owner
// (copied to Secrets; the heartbeat stays on the pod).
func ownerAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if k != AnnotationHeartbeat {
			out[k] = v
		}
	}
	return out
}

// podFor builds the hardened pod of a lease.
func (p *Provider) podFor(l *lease, spec sandbox.Spec, image string, useHost bool, uid, gid int64,
	labels, annotations map[string]string) (*corev1.Pod, error) {
	annotations[AnnotationHeartbeat] = time.Now().UTC().Format(time.RFC3339)
	homeSize := resource.NewQuantity(p.opts.HomeBytes, resource.BinarySI)
	tmpSize := resource.NewQuantity(p.opts.TmpBytes, resource.BinarySI)
	workspaceSize := resource.NewQuantity(p.opts.WorkspaceBytes, resource.BinarySI)
	deadline := int64(p.opts.Lifetime / time.Second)
	grace := int64(2)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	sec := containerSecurity(uid, gid, seccomp)
	sec.ReadOnlyRootFilesystem = new(true)
	c := corev1.Container{
		Name:            containerName,
		Image:           image,
		ImagePullPolicy: p.opts.PullPolicy,
		Command:         []string{"sh", "-c", startScript, "outpost-lease", Home},
		WorkingDir:      Root,
		Env:             defaultEnv(spec.Env),
		Resources:       p.resources(spec),
		SecurityContext: sec,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "home", MountPath: "/home"},
			{Name: "tmp", MountPath: Tmp},
			{Name: "workspace", MountPath: Root},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	if l.secret != "" {
		// Only the Secret's name is in the pod; its values reach the
		// container's environment (and every exec) through the kubelet.
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: l.secret},
		}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: p.ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			ShareProcessNamespace:         new(true),
			HostNetwork:                   useHost,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  p.opts.NodeSelector,
			Tolerations:                   p.opts.Tolerations,
			PriorityClassName:             p.opts.PriorityClassName,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				RunAsNonRoot:   new(true),
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{c},
			Volumes: []corev1.Volume{
				{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: homeSize}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: tmpSize}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: workspaceSize}}},
			},
		},
	}
	if useHost {
		pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	if p.opts.RuntimeClassName != "" {
		pod.Spec.RuntimeClassName = &p.opts.RuntimeClassName
	}
	for _, s := range p.opts.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if l.sidecar != nil {
		sc, err := sidecarContainerFor(l.sidecar, image, p.opts.PullPolicy, seccomp)
		if err != nil {
			return nil, err
		}
		pod.Spec.Containers = append(pod.Spec.Containers, sc)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "sidecar",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: resource.NewQuantity(sidecarVolumeBytes, resource.BinarySI)}}})
	}
	return pod, nil
}

// resources are the lease container's requests and limits: CPU and
// memory from spec, else the provider's options (negative: no limit), the
// provider's ephemeral storage; requests are the provider's, capped at the
// limits (a resource with a limit and no request would get a request equal
// to the limit).
func (p *Provider) resources(spec sandbox.Spec) corev1.ResourceRequirements {
	lim, req := corev1.ResourceList{}, corev1.ResourceList{}
	res := p.leaseResources(spec)
	cpus, mem := res.CPUs, res.MemoryBytes
	cpuReq := p.opts.CPURequest
	if cpus > 0 {
		lim[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(cpus*1000), resource.DecimalSI)
		cpuReq = min(cpuReq, cpus)
	}
	req[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(cpuReq*1000), resource.DecimalSI)
	memReq := p.opts.MemoryRequestBytes
	if mem > 0 {
		lim[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
		memReq = min(memReq, mem)
	}
	req[corev1.ResourceMemory] = *resource.NewQuantity(memReq, resource.BinarySI)
	if disk := p.opts.EphemeralStorageBytes; disk > 0 {
		lim[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(disk, resource.BinarySI)
		req[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(min(ephemeralRequestBytes, disk), resource.BinarySI)
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// containerSecurity is the security context of a pod's containers: a
// non-root user, no privilege escalation, no capabilities.
func containerSecurity(uid, gid int64, seccomp *corev1.SeccompProfile) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &gid,
		RunAsNonRoot:             new(true),
		AllowPrivilegeEscalation: new(false),
		Privileged:               new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           seccomp,
	}
}

// defaultEnv is the container's plain environment: HOME, TZ and
// XDG_CACHE_HOME, except those Spec.Env sets (its values come from the
// Secret, and a plain env entry would win over them).
func defaultEnv(specEnv map[string]string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range []corev1.EnvVar{
		{Name: "HOME", Value: Home},
		{Name: "TZ", Value: "UTC"},
		{Name: "XDG_CACHE_HOME", Value: "/tmp/.cache"},
	} {
		if _, set := specEnv[e.Name]; !set {
			out = append(out, e)
		}
	}
	return out
}

// adoptSecret makes the pod the owner of the lease's Secret. A failure only
// loses the cluster-side backstop (Release and Reap still delete the Secret).
func (l *lease) adoptSecret(ctx context.Context, podUID types.UID) {
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q}]}}`, l.name, podUID)
	cctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	if err := l.p.cs.mergePatch(cctx, "secrets", l.p.ns, l.secret, []byte(patch)); err != nil {
		l.p.log.Debug("set secret owner", "secret", l.secret, "err", err)
	}
}

// leaseResources are the limits of a lease of spec on this provider.
func (p *Provider) leaseResources(spec sandbox.Spec) sandbox.Resources {
	return sandbox.LeaseResources(spec, p.opts.CPUs, p.opts.MemoryBytes, p.opts.Pids)
}
