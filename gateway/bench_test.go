package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/gateway"
)

// benchUpstream streams Anthropic-shaped events: ?events=N events of
// ?size=S bytes of text each, flushed one by one, then the closing usage.
func benchUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.URL.Query().Get("events"))
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		_, _ = io.WriteString(w, `event: message_start`+"\n"+`data: {"type":"message_start","message":{"model":"bench","usage":{"input_tokens":10,"output_tokens":1}}}`+"\n\n")
		f.Flush()
		ev := []byte(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` +
			strings.Repeat("x", size) + `"}}` + "\n\n")
		for range n {
			_, _ = w.Write(ev)
			f.Flush()
		}
		_, _ = io.WriteString(w, `event: message_delta`+"\n"+`data: {"type":"message_delta","usage":{"output_tokens":99}}`+"\n\n")
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchTarget is one way to reach the upstream: directly, or through the
// gateway on loopback TCP or on its unix socket.
type benchTarget struct {
	name   string
	base   string
	key    string
	client *http.Client
}

func benchTargets(b *testing.B) ([]benchTarget, *httptest.Server) {
	b.Helper()
	up := benchUpstream(b)
	gw, err := gateway.New(gateway.Options{Upstreams: []string{up.URL}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = gw.Close() })
	tcp, err := gw.ListenTCP("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ogwb-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "gw.sock")
	if err := gw.ListenUnix(sock); err != nil {
		b.Fatal(err)
	}
	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.URL, Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: "sk-bench"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Revoke)
	plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	unix := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	b.Cleanup(plain.CloseIdleConnections)
	b.Cleanup(unix.CloseIdleConnections)
	return []benchTarget{
		{"direct", up.URL, "sk-bench", plain},
		{"gateway-tcp", tcp, g.Placeholder(), plain},
		{"gateway-unix", "http://gateway", g.Placeholder(), unix},
	}, up
}

func streamReq(b *testing.B, t benchTarget, events, size int) *http.Response {
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/messages?events=%d&size=%d", t.base, events, size),
		strings.NewReader(`{"model":"bench","stream":true}`))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-Api-Key", t.key)
	resp, err := t.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// BenchmarkStreamFirstEvent times a streamed request from sending it to
// reading its first event (time to first byte), directly and through the
// gateway; the difference of ns/op is the gateway's added latency.
func BenchmarkStreamFirstEvent(b *testing.B) {
	targets, _ := benchTargets(b)
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			for b.Loop() {
				resp := streamReq(b, t, 0, 0)
				br := bufio.NewReader(resp.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if line == "\n" {
						break
					}
				}
				b.StopTimer()
				_, _ = io.Copy(io.Discard, br)
				resp.Body.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkStreamThroughput streams 4 MiB in 2 KiB events, each flushed,
// directly and through the gateway (which meters every event); MB/s is the
// throughput.
func BenchmarkStreamThroughput(b *testing.B) {
	const events, size = 2048, 2048
	targets, _ := benchTargets(b)
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			b.SetBytes(events * size)
			for b.Loop() {
				resp := streamReq(b, t, events, size)
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n < events*size {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}

// BenchmarkGatewayVsDirect interleaves the direct path and the gateway (on
// its unix socket, as a lease uses it) in every iteration, alternating
// which goes first, so both see the same machine load: one first-event
// request and one 4 MiB stream each. It reports the mean time to first
// event of each path and the gateway's addition, both throughputs and
// their ratio.
func BenchmarkGatewayVsDirect(b *testing.B) {
	const events, size = 2048, 2048
	targets, _ := benchTargets(b)
	direct, gw := targets[0], targets[2]
	var ttfb, dur [2]time.Duration
	i := 0
	for b.Loop() {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		i++
		for _, k := range order {
			t := []benchTarget{direct, gw}[k]
			start := time.Now()
			resp := streamReq(b, t, 0, 0)
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				if line == "\n" {
					break
				}
			}
			ttfb[k] += time.Since(start)
			_, _ = io.Copy(io.Discard, br)
			resp.Body.Close()

			start = time.Now()
			resp = streamReq(b, t, events, size)
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n < events*size {
				b.Fatalf("read %d bytes: %v", n, err)
			}
			dur[k] += time.Since(start)
		}
	}
	runs := float64(i)
	mbps := func(d time.Duration) float64 { return float64(events*size) * runs / d.Seconds() / (1 << 20) }
	b.ReportMetric(float64(ttfb[0].Microseconds())/runs, "direct-ttfb-µs")
	b.ReportMetric(float64(ttfb[1].Microseconds())/runs, "gateway-ttfb-µs")
	b.ReportMetric(float64((ttfb[1]-ttfb[0]).Microseconds())/runs, "added-ttfb-µs")
	b.ReportMetric(mbps(dur[0]), "direct-MiB/s")
	b.ReportMetric(mbps(dur[1]), "gateway-MiB/s")
	b.ReportMetric(float64(dur[0])/float64(dur[1]), "throughput-ratio")
}
