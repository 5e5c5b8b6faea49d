package kubernetes

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// fakeAPI is an API server that answers /version and records the pods it
// is asked to create, refusing each (422), so Acquire ends there.
type fakeAPI struct {
	mu   sync.Mutex
	pods []corev1.Pod
}

func (f *fakeAPI) serve(t *testing.T) *rest.Config {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = io.WriteString(w, `{"major":"1","minor":"30","gitVersion":"v1.30.0"}`)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods"):
			var pod corev1.Pod
			_ = json.NewDecoder(r.Body).Decode(&pod)
			f.mu.Lock()
			f.pods = append(f.pods, pod)
			f.mu.Unlock()
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,"message":"refused by the test"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func (f *fakeAPI) created() []corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]corev1.Pod(nil), f.pods...)
}

// A CPU limit the pod cannot carry as asked is a configuration error
// before any pod is made, as on Docker: NaN or infinite (Docker refuses
// both; here a NaN spec fell back to the default and a NaN option meant
// no limit at all) or below sandbox.MinCPUs (a limit under 1m is written
// as 0, which the kubelet reads as no CPU quota at all).
func TestCPULimitsTheKindCannotApplyAreRefused(t *testing.T) {
	ctx := context.Background()
	f := &fakeAPI{}
	cfg := f.serve(t)

	_, err := New(ctx, Options{RestConfig: cfg, RunnerGrace: -1, CPUs: math.NaN()})
	require.Error(t, err, "a NaN CPU option")
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)

	p, err := New(ctx, Options{RestConfig: cfg, RunnerGrace: -1})
	require.NoError(t, err)
	defer p.Close()
	for _, cpus := range []float64{math.NaN(), math.Inf(1), 0.0004} {
		_, err := p.Acquire(ctx, sandbox.Spec{CPUs: cpus})
		require.Error(t, err, "cpus %v", cpus)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "cpus %v: %v", cpus, err)
		assert.Contains(t, err.Error(), "cpu", "cpus %v: the error names the CPU limit", cpus)
		for _, pod := range f.created() {
			t.Errorf("cpus %v: a pod was made with CPU limit %s", cpus, pod.Spec.Containers[0].Resources.Limits.Cpu())
		}
	}

	// The smallest accepted limit reaches the pod as itself.
	_, err = p.Acquire(ctx, sandbox.Spec{CPUs: sandbox.MinCPUs})
	require.Error(t, err) // the fake refuses every pod
	pods := f.created()
	require.Len(t, pods, 1)
	assert.Equal(t, "10m", pods[0].Spec.Containers[0].Resources.Limits.Cpu().String())
}
