package outpost

import (
	"context"
	"io"
	"time"

	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/grading"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/source"
)

// Verify grades one attempt of job j with its verifier (j.Verify) in a
// fresh lease of the runner's sandbox engine: the job's source at its
// commit (the snapshot the agent's lease was made from), patch applied
// with git apply (nil: the untouched source), the verifier's test files
// copied over the workspace, then its command (see [harness.Verify]); a
// test_patch goes in after the patch and before the test files, and test
// lists grade the command's output (package grading). The
// lease takes the verifier's image (default the job's, then the runner's),
// the job's resources, and network "none" unless the verifier names one
// (the host sandbox, which isolates nothing, leaves the network as it is;
// a Kubernetes pod, which cannot go without one, takes the pod network,
// never the node's: see [sandbox.Unnetworked]);
// no credential and no CLI go into it. It is [batch.Options.Verify] for
// [Runner.Batch]; it returns nil for a job without a verifier.
func (r *Runner) Verify(ctx context.Context, j batch.Job, patch []byte) *harness.Verification {
	vs := j.Verify
	if vs == nil {
		return nil
	}
	errorf := func(err error, what string) *harness.Verification {
		return &harness.Verification{Verdict: harness.VerdictError, Error: what + ": " + err.Error()}
	}
	if err := j.Compile(); err != nil {
		return errorf(err, "the job")
	}
	snap, err := r.prepareSource(ctx, *j.Source)
	if err != nil {
		return errorf(err, "prepare the source")
	}
	vf := harness.Verifier{Command: vs.Command, Timeout: time.Duration(vs.Timeout), TestPatch: []byte(vs.TestPatch)}
	if vs.Parser != "" {
		vf.Tests = &harness.TestLists{Parser: grading.Parser(vs.Parser), FailToPass: vs.FailToPass, PassToPass: vs.PassToPass}
	}
	if vs.Files != "" {
		files, err := r.prepareSource(ctx, source.Spec{Dir: vs.Files})
		if err != nil {
			return errorf(err, "the test files")
		}
		vf.Files = func(ctx context.Context) (io.ReadCloser, error) { return files.Tar(ctx), nil }
	}
	// No agent: the lease gets no CLI.
	prov, spec, _, err := r.lease(ctx, agents.Agent{}, "")
	if err != nil {
		return errorf(err, "the verifier's sandbox")
	}
	hostPath := r.engineDelivery() == sandbox.DeliverHostPath
	switch {
	case vs.Network != "":
		spec.Network = vs.Network
	case !hostPath:
		// The host sandbox isolates nothing, the network included.
		spec.Network = r.offlineNetwork()
	}
	image := vs.Image
	if image == "" {
		image = j.Image
	}
	over := sandbox.Override{Image: image, CPUs: j.CPUs, MemoryBytes: int64(j.Memory), Pids: j.Pids}
	if hostPath {
		// The host sandbox runs the verifier as it is: it refuses the
		// verifier's image, as it does a turn's, but leaves out the
		// job's limits, which its turns refuse there (outpost grade
		// grades attempts that ran elsewhere).
		over = sandbox.Override{Image: image}
	}
	if spec, err = over.Apply(spec, r.kind.Name, !hostPath); err != nil {
		return errorf(err, "the verifier's lease")
	}
	return harness.Verify(ctx, harness.VerifyInput{Provider: prov, Spec: spec, Verifier: vf,
		Source: harness.Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return snap.Tar(ctx), nil }, Patch: patch}})
}

// offlineNetwork is the network of a lease of the open engine that should
// reach nothing: "none", or what the engine offers instead (a Kubernetes
// pod's is the pod network).
func (r *Runner) offlineNetwork() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.engine.(sandbox.Unnetworked); ok {
		return u.OfflineNetwork()
	}
	return "none"
}

// engineDelivery is the open engine's delivery.
func (r *Runner) engineDelivery() sandbox.DeliveryMode {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.engine == nil {
		return ""
	}
	return r.engine.Delivery().Mode
}
