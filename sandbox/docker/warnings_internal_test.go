package docker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// An engine that makes the container but drops a limit it was asked for
// (it says so only in the create answer's warnings: no pids cgroup on a
// rootless or cgroup v1 engine) gives no lease: the acquisition is a
// configuration error naming the warning, and the container is removed.
func TestLimitDroppedByTheEngineIsRefused(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/containers/create"):
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"Id":"c0ffee","Warnings":["Your kernel does not support pids limit capabilities or the cgroup is not mounted. PIDs limit discarded."]}`)
		case r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/containers/c0ffee"):
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message":"not in this test"}`)
		}
	}))
	defer srv.Close()
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithVersion("1.43"))
	require.NoError(t, err)
	defer cli.Close()
	p := &Provider{cli: cli, local: true, host: srv.URL, log: slog.New(slog.DiscardHandler),
		opts: Options{User: "1000:1000", Network: "none", Image: DefaultImage, Version: "test", RunID: "run",
			OpTimeout: DefaultOpTimeout, ReleaseTimeout: DefaultReleaseTimeout, TempDir: t.TempDir()}}

	_, err = p.Acquire(context.Background(), sandbox.Spec{})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.Contains(t, err.Error(), "PIDs limit discarded")
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, strings.Join(calls, "\n"), "DELETE /v1.43/containers/c0ffee", "the container is removed")
	assert.Empty(t, p.Live(), "no lease is left")

	assert.Empty(t, droppedLimits([]string{"IPv4 forwarding is disabled. Networking will not work."}))
	assert.NotEmpty(t, droppedLimits([]string{"Resource limits are not supported and ignored on cgroups V1 rootless systems"}))
}
