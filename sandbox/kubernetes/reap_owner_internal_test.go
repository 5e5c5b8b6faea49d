package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
)

// reapAPI is an API server that lists the given pods and Secrets and
// records what it is asked to delete.
type reapAPI struct {
	pods    []corev1.Pod
	secrets []corev1.Secret
	mu      sync.Mutex
	deleted []string
}

func (f *reapAPI) serve(t *testing.T) *rest.Config {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = io.WriteString(w, `{"major":"1","minor":"30","gitVersion":"v1.30.0"}`)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods"):
			_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: f.pods})
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/secrets"):
			_ = json.NewEncoder(w).Encode(corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, Items: f.secrets})
		case r.Method == http.MethodDelete:
			f.mu.Lock()
			f.deleted = append(f.deleted, r.URL.Path)
			f.mu.Unlock()
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// A host name over the 63 characters of a label value is cut in the owner
// label (the full name is in AnnotationOwnerHost): another host whose name
// starts with the same 63 characters is not this host, and its live lease
// (fresh heartbeat) must not be judged by a pid of this host.
func TestReapTellsLongHostNamesApart(t *testing.T) {
	prefix := strings.Repeat("build-agent.", 6) // 72 characters
	here, there := prefix+"a", prefix+"b"
	require.Equal(t, labelValue(here), labelValue(there))
	now := time.Now()
	meta := func(name string) metav1.ObjectMeta {
		p := &Provider{owner: procowner.Owner{PID: 4242, Host: there, Start: "77"}}
		labels, annotations := p.labels(nil, "lease1")
		annotations[AnnotationHeartbeat] = now.UTC().Format(time.RFC3339)
		return metav1.ObjectMeta{Name: name, Namespace: "outpost", Labels: labels, Annotations: annotations,
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}
	}
	f := &reapAPI{
		pods:    []corev1.Pod{{ObjectMeta: meta("outpost-lease1")}},
		secrets: []corev1.Secret{{ObjectMeta: meta("outpost-lease1-env")}},
	}
	p, err := New(context.Background(), Options{RestConfig: f.serve(t), RunnerGrace: -1})
	require.NoError(t, err)
	defer p.Close()
	left, err := p.Reap(context.Background(), ReapOptions{ReapOptions: sandbox.ReapOptions{Hostname: here,
		Alive: func(int, string) bool { return false }}}) // the pid is no process here
	require.NoError(t, err)
	assert.Empty(t, left, "a live lease of host %s was reaped by host %s", there, here)
	assert.Empty(t, f.deleted)

	// The same lease owned by this host's dead process is reaped.
	f.deleted = nil
	left, err = p.Reap(context.Background(), ReapOptions{ReapOptions: sandbox.ReapOptions{Hostname: there,
		Alive: func(int, string) bool { return false }}})
	require.NoError(t, err)
	assert.Len(t, left, 2)
	assert.Len(t, f.deleted, 2)
}

// TestOwnerLabelsHelper is the child of TestReapSparesOwnersInAnotherPIDNamespace: it
// prints the labels of its leases and lives until its input closes.
func TestOwnerLabelsHelper(t *testing.T) {
	if os.Getenv("OUTPOST_OWNER_LABELS_HELPER") != "1" {
		t.Skip("helper process")
	}
	labels, annotations := (&Provider{owner: procowner.Self()}).labels(nil, "lease2")
	_ = json.NewEncoder(os.Stdout).Encode(metav1.ObjectMeta{Labels: labels, Annotations: annotations})
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// An outpost running in another pid namespace with this host's name (a
// pod or container on the host network) labels its pods with a pid this
// host does not know, or knows as another process: gc here must not take
// that live owner (fresh heartbeat) for a dead one.
func TestReapSparesOwnersInAnotherPIDNamespace(t *testing.T) {
	var meta metav1.ObjectMeta
	testenv.OtherPIDNamespace(t, "TestOwnerLabelsHelper", "OUTPOST_OWNER_LABELS_HELPER", &meta)
	host, _ := os.Hostname()
	require.Equal(t, labelValue(host), meta.Labels[LabelOwnerHost], "the child shares this host's name")
	now := time.Now()
	meta.Name, meta.Namespace = "outpost-lease2", "outpost"
	meta.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationHeartbeat] = now.UTC().Format(time.RFC3339)
	f := &reapAPI{pods: []corev1.Pod{{ObjectMeta: meta}}}
	p, err := New(context.Background(), Options{RestConfig: f.serve(t), RunnerGrace: -1})
	require.NoError(t, err)
	defer p.Close()
	left, err := p.Reap(context.Background(), ReapOptions{})
	require.NoError(t, err)
	assert.Empty(t, left, "the live owner's pod (pid %s in its own pid namespace) counts as left over", meta.Labels[LabelOwnerPID])
	assert.Empty(t, f.deleted)
}
