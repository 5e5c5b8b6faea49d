package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	outpostcli "github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/usage"
)

// gwMarker is the real credential of the gateway tests: the scripted server
// must receive it on every request, and it must appear nowhere a lease or a
// caller can see.
const gwMarker = "sk-outpost-marker-gateway-3f9a1c"

// gwCLI is one agent CLI and credential form run through the gateway.
type gwCLI struct {
	name    string
	adapter func() adapters.Adapter
	// direct builds the Docker environment of the direct path (network
	// "host", the placeholder key straight to the server).
	direct func(t *testing.T) env
	scheme gateway.Scheme
	// directEndpoint is the endpoint of the direct path.
	directEndpoint func(srv *outposttest.Server) *adapters.Endpoint
	// retries is the CLI's retry cap (nil: the CLI has no knob).
	retries *int
	// quota is the gateway's evidence for the quota scenario.
	quota gateway.EvidenceKind
}

func gwCLIs() []gwCLI {
	one := 1
	key := func(srv *outposttest.Server) *adapters.Endpoint {
		return &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
	}
	return []gwCLI{
		{name: "claude-api-key", adapter: func() adapters.Adapter { return claude.New() },
			direct: func(t *testing.T) env { return dockerEnv(t, testenv.CLI(t, "claude")) },
			scheme: gateway.SchemeAPIKey, directEndpoint: key, retries: &one, quota: gateway.EvidenceQuota},
		{name: "claude-oauth-token", adapter: func() adapters.Adapter { return claude.New() },
			direct: func(t *testing.T) env { return dockerEnv(t, testenv.CLI(t, "claude")) },
			scheme: gateway.SchemeClaudeOAuth, retries: &one, quota: gateway.EvidenceQuota,
			directEndpoint: func(srv *outposttest.Server) *adapters.Endpoint {
				return &adapters.Endpoint{BaseURL: srv.URL(), OAuthToken: outposttest.PlaceholderOAuthToken}
			}},
		{name: "codex", adapter: func() adapters.Adapter { return codex.New() },
			direct: func(t *testing.T) env { return codexEnvs(t)[1] },
			scheme: gateway.SchemeBearer, directEndpoint: key, retries: &one, quota: gateway.EvidenceQuota},
		// Copilot's service words its quota as a 429 rate limit; only the
		// CLI's text tells them apart.
		{name: "copilot", adapter: func() adapters.Adapter { return copilot.New() },
			direct: func(t *testing.T) env { return copilotEnvs(t)[1] },
			scheme: gateway.SchemeBearer, directEndpoint: key, quota: gateway.EvidenceRateLimit},
	}
}

// gwFixture is a scripted upstream, a gateway in front of it serving a unix
// socket, and a Docker provider whose leases have no network.
type gwFixture struct {
	srv      *outposttest.Server
	gw       *gateway.Gateway
	sock     string
	provider *docker.Provider
	logs     *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newGWFixture(t *testing.T, opts ...outposttest.Option) *gwFixture {
	t.Helper()
	f := &gwFixture{srv: server(t, opts...), logs: &syncBuffer{}}
	gw, err := gateway.New(gateway.Options{Upstreams: []string{f.srv.URL()},
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, gw.Close()) })
	// A private directory: only the bind mount reaches the socket.
	dir, err := os.MkdirTemp("", "ogw-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f.sock = filepath.Join(dir, "gateway.sock")
	require.NoError(t, gw.ListenUnix(f.sock))
	f.gw = gw
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := docker.New(ctx, docker.Options{Network: "none", RunID: "e2e-gw-" + uuid.NewString(), Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		_ = p.Close()
	})
	f.provider = p
	return f
}

// lease acquires a network-less lease with the CLI's mounts and the gateway
// socket forwarded to its loopback.
func (f *gwFixture) lease(t *testing.T, direct env) (sandbox.Sandbox, string) {
	t.Helper()
	spec := direct.spec
	spec.Workspace = workspace(t)
	spec.Forwards = []sandbox.Forward{{Socket: f.sock, Port: gateway.DefaultLeasePort}}
	sb, err := f.provider.Acquire(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
	return sb, spec.Workspace
}

// gwTurn runs one turn through a fresh grant, revokes it, and returns the
// result and the gateway's snapshot — the calls a harness makes per turn.
func gwTurn(t *testing.T, c gwCLI, f *gwFixture, sb sandbox.Sandbox, in adapters.Input, spec gateway.GrantSpec,
	onEvent func(adapters.Event), logs io.Writer) (*harness.Result, gateway.Snapshot, error) {
	t.Helper()
	spec.Upstream = f.srv.URL()
	spec.Credential = gateway.Credential{Scheme: c.scheme, Secret: gwMarker}
	spec.Label = c.name
	g, err := f.gw.Grant(spec)
	require.NoError(t, err)
	defer g.Revoke()
	in.Endpoint = g.Endpoint(gateway.LeaseURL(gateway.DefaultLeasePort))
	in.MaxRetries = c.retries
	if logs == nil {
		logs = io.Discard
	}
	res, runErr := harness.Run(context.Background(), harness.Turn{
		Adapter: c.adapter(), Input: in, Sandbox: sb, KeepEvents: true, OnEvent: onEvent,
		Limits: harness.Limits{Deadline: 3 * time.Minute, IdleTimeout: 2 * time.Minute},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	g.Revoke()
	return res, g.Snapshot(), runErr
}

func directTurn(t *testing.T, c gwCLI, srv *outposttest.Server, sb sandbox.Sandbox, in adapters.Input) (*harness.Result, error) {
	t.Helper()
	in.Endpoint = c.directEndpoint(srv)
	in.MaxRetries = c.retries
	return harness.Run(context.Background(), harness.Turn{
		Adapter: c.adapter(), Input: in, Sandbox: sb, KeepEvents: true,
		Limits: harness.Limits{Deadline: 3 * time.Minute, IdleTimeout: 2 * time.Minute},
	})
}

// sameOutcome compares what a caller acts on: success, class, outage and
// authentication details, the reset instant (within the rounding of
// relative wordings) and the final text of a success.
func sameOutcome(t *testing.T, direct, gw *harness.Result) {
	t.Helper()
	d, g := direct.Outcome(), gw.Outcome()
	assert.Equal(t, d.OK, g.OK, "ok: direct %q, gateway %q", d.Error, g.Error)
	assert.Equal(t, d.Class, g.Class, "direct %q, gateway %q", d.Error, g.Error)
	assert.Equal(t, d.Unavailable, g.Unavailable)
	assert.Equal(t, d.Auth, g.Auth)
	assert.Equal(t, d.ExitCode, g.ExitCode)
	assert.Equal(t, d.ResetAt == "", g.ResetAt == "", "reset known on both paths")
	if d.ResetAt != "" && g.ResetAt != "" {
		dt, _ := time.Parse(time.RFC3339, d.ResetAt)
		gt, _ := time.Parse(time.RFC3339, g.ResetAt)
		assert.WithinDuration(t, dt, gt, 2*time.Minute)
	}
	if d.OK {
		assert.Equal(t, d.Text, g.Text)
	}
}

// checkWire: every request the upstream saw carried the real key, and the
// gateway's usage equals the server's own counts.
func checkWire(t *testing.T, srv *outposttest.Server, s gateway.Snapshot) {
	t.Helper()
	reqs := srv.Requests()
	require.NotEmpty(t, reqs, "the turn reached the upstream")
	assert.Equal(t, len(reqs), s.Requests-refused(s), "every forwarded request reached the upstream")
	for _, r := range reqs {
		assert.Equal(t, outposttest.KeyFingerprint(gwMarker), r.KeyFingerprint, "%s %s carried the real key", r.Method, r.Path)
	}
	var want usage.Usage
	statuses := make([]int, 0, len(reqs))
	for _, r := range reqs {
		statuses = append(statuses, r.Status)
		if r.Usage != nil {
			want = want.Add(usage.Usage{Input: r.Usage.Input, Cached: r.Usage.Cached, CacheCreated: r.Usage.CacheCreated,
				Output: r.Usage.Output, Reasoning: r.Usage.Reasoning})
		}
	}
	got := s.Usage
	got.Complete, got.CostUSD = false, 0
	assert.Equal(t, want, got, "gateway usage equals the server's own token counts")
	var forwarded []int
	for _, e := range s.Exchanges {
		if e.Answered == gateway.ByUpstream {
			forwarded = append(forwarded, e.Status)
		}
	}
	assert.Equal(t, statuses, forwarded, "status history in order")
}

func refused(s gateway.Snapshot) int {
	n := 0
	for _, e := range s.Exchanges {
		if e.Answered == gateway.ByGateway {
			n++
		}
	}
	return n
}

// TestGatewayRealCLIs runs each real CLI in a Docker lease with network
// "none" whose only way out is the gateway's socket, and the same turns on
// the direct path: ok, tool, quota, overloaded (529/503) and unauthorized
// turns end the same way; the server sees the real key on every request;
// the gateway's usage equals the server's counts.
func TestGatewayRealCLIs(t *testing.T) {
	testenv.Short(t)
	reset := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Hour)
	for _, c := range gwCLIs() {
		t.Run(c.name, func(t *testing.T) {
			direct := c.direct(t)
			f := newGWFixture(t, outposttest.WithQuotaReset(reset))
			directSrv := server(t, outposttest.WithQuotaReset(reset))
			sb, ws := f.lease(t, direct)
			dsb, dws := leaseIn(t, direct)
			for _, sc := range []outposttest.Scenario{outposttest.ScenarioOK, outposttest.ScenarioTool, outposttest.ScenarioQuota,
				outposttest.ScenarioOverloaded, outposttest.ScenarioUnauthorized} {
				t.Run(string(sc), func(t *testing.T) {
					mark := "MARK-" + strings.ReplaceAll(string(sc), "_", "")
					in := adapters.Input{Prompt: "do " + mark + " " + outposttest.Directive(sc)}
					f.srv.ResetRequests()
					res, snap, err := gwTurn(t, c, f, sb, in, gateway.GrantSpec{}, nil, nil)
					dres, derr := directTurn(t, c, directSrv, dsb, in)
					sameOutcome(t, dres, res)
					checkWire(t, f.srv, snap)

					ev, failed := snap.Evidence()
					switch sc {
					case outposttest.ScenarioOK, outposttest.ScenarioTool:
						require.NoError(t, err, "output: %s", resTail(res))
						require.NoError(t, derr)
						assert.Contains(t, res.Text, mark)
						assert.False(t, failed)
						assert.True(t, snap.Usage.Complete, "complete usage from the wire")
						assert.Positive(t, snap.Usage.Output)
						if c.name == "copilot" {
							// Copilot prints no usage; the gateway measured it anyway.
							assert.Positive(t, snap.Usage.Input+snap.Usage.Cached)
						}
						if sc == outposttest.ScenarioTool {
							name, content := outposttest.ToolFile(mark)
							for _, dir := range []string{ws, dws} {
								got, rerr := os.ReadFile(filepath.Join(dir, name))
								require.NoError(t, rerr, "the tool ran in %s", dir)
								assert.Equal(t, content, string(got))
							}
							assert.GreaterOrEqual(t, snap.Requests, 2)
						}
					case outposttest.ScenarioQuota:
						require.True(t, failed)
						assert.Equal(t, c.quota, ev.Kind)
						assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
					case outposttest.ScenarioOverloaded:
						require.True(t, failed)
						assert.Equal(t, gateway.EvidenceOverloaded, ev.Kind)
					case outposttest.ScenarioUnauthorized:
						require.True(t, failed)
						assert.Equal(t, gateway.EvidenceAuth, ev.Kind)
					}
				})
			}
		})
	}
}

// TestGatewayKeepsTheKeyOutOfTheLease samples a lease while a slow turn
// runs through the gateway: the marker key is in no process environment,
// argv, file under the home or workspace, nor in docker inspect,
// events, results or logs — while the placeholder is visibly in the CLI's
// environment (so the sample did see the CLI). A connection from the lease
// to a listener on the host's loopback fails while the turn completes.
func TestGatewayKeepsTheKeyOutOfTheLease(t *testing.T) {
	testenv.Short(t)
	// A second listener on the host's loopback, which the lease must not reach.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nreached the host")
			_ = c.Close()
		}
	}()
	hostPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	for _, c := range gwCLIs() {
		t.Run(c.name, func(t *testing.T) {
			direct := c.direct(t)
			f := newGWFixture(t, outposttest.WithChunkDelay(400*time.Millisecond))
			sb, _ := f.lease(t, direct)
			var once sync.Once
			samples := make(chan map[string]string, 1)
			var mu sync.Mutex
			var events []string
			onEvent := func(ev adapters.Event) {
				b, _ := json.Marshal(ev)
				mu.Lock()
				events = append(events, string(b))
				mu.Unlock()
				// The CLI is running: sample the lease once, off the event path.
				once.Do(func() { go func() { samples <- sampleLease(sb, hostPort) }() })
			}
			var logs syncBuffer
			res, snap, err := gwTurn(t, c, f, sb, adapters.Input{Prompt: "slowly MARK-slow " + outposttest.Directive(outposttest.ScenarioSlow)},
				gateway.GrantSpec{}, onEvent, &logs)
			require.NoError(t, err, "output: %s", resTail(res))
			assert.Contains(t, res.Text, "MARK-slow")
			var sample map[string]string
			select {
			case sample = <-samples:
			case <-time.After(time.Minute):
				t.Fatal("the lease was never sampled")
			}
			// The sample saw the running CLI: its environment holds the placeholder.
			assert.Contains(t, sample["environ"], gateway.PlaceholderPrefix, "the CLI's environment was sampled")
			assert.Contains(t, sample["argv"], c.adapter().Binary(), "sanity: the CLI was running")
			assert.NotEmpty(t, sample["files "+sb.Home()], "the home was copied out")
			assert.Contains(t, sample["egress"], "refused-or-failed", "the host's loopback is unreachable from the lease: %s", sample["egress"])
			assert.NotContains(t, sample["egress"], "reached the host")
			checkWire(t, f.srv, snap)

			inspect, err := f.provider.Client().ContainerInspect(context.Background(), sb.ID())
			require.NoError(t, err)
			assert.Equal(t, "none", string(inspect.HostConfig.NetworkMode))
			inspectJSON, _ := json.Marshal(inspect)
			resJSON, _ := json.Marshal(res)
			outcomeJSON, _ := json.Marshal(res.Outcome())
			snapJSON, _ := json.Marshal(snap)
			mu.Lock()
			allEvents := strings.Join(events, "\n")
			mu.Unlock()
			places := map[string]string{
				"docker inspect": string(inspectJSON), "result": string(resJSON), "outcome": string(outcomeJSON),
				"events": allEvents, "harness logs": logs.String(), "gateway logs": f.logs.String(),
				"snapshot": string(snapJSON), "server log": requestLog(f.srv),
			}
			for k, v := range sample {
				places["lease "+k] = v
			}
			for where, text := range places {
				assert.NotContains(t, text, gwMarker, "the real key leaked into %s", where)
			}
		})
	}
}

// sampleLease reads, from inside the running lease, everything a prompt-
// injected command could: the environment, every process's environ and
// argv, every file under the home and the workspace (copied out and
// searched on the host, so the searched-for key never enters the lease), and
// tries the host's loopback.
func sampleLease(sb sandbox.Sandbox, hostPort string) map[string]string {
	out := map[string]string{}
	run := func(script string) string {
		p, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sh", "-c", script}})
		if err != nil {
			return "exec failed: " + err.Error()
		}
		defer p.Close()
		s := readAll(p)
		_, _ = p.Wait()
		return s
	}
	out["env"] = run("env")
	out["environ"] = run(`for f in /proc/[0-9]*/environ; do tr '\0' '\n' <"$f" 2>/dev/null; done`)
	out["argv"] = run(`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null; echo; done`)
	out["egress"] = run(`printf 'GET / HTTP/1.0\r\n\r\n' | socat -t 3 - TCP:127.0.0.1:` + hostPort + ` 2>&1 || echo refused-or-failed`)
	for _, dir := range []string{sb.Home(), sb.Root()} {
		rc, err := sb.CopyOut(context.Background(), dir)
		if err != nil {
			out["files "+dir] = "copy failed: " + err.Error()
			continue
		}
		b, _ := io.ReadAll(rc)
		_ = rc.Close()
		out["files "+dir] = string(b)
	}
	return out
}

// TestGatewayBudgetStopsToolTurn: a per-turn cost cap below one answer's
// cost lets the tool call through and refuses the request after the tool
// result; each CLI reports the refusal once, without retrying, with the
// budget marker in its failure.
func TestGatewayBudgetStopsToolTurn(t *testing.T) {
	testenv.Short(t)
	perToken := func(_ string, u usage.Usage) (float64, bool) { return float64(u.Tokens()) * 1e-6, true }
	for _, c := range gwCLIs() {
		if c.name == "claude-oauth-token" {
			continue // the same CLI and wire as claude-api-key
		}
		t.Run(c.name, func(t *testing.T) {
			direct := c.direct(t)
			f := newGWFixture(t)
			sb, ws := f.lease(t, direct)
			budget, err := gateway.NewBudget(1e-6)
			require.NoError(t, err)
			mark := "MARK-budget"
			res, snap, err := gwTurn(t, c, f, sb, adapters.Input{Prompt: "write " + mark + " " + outposttest.Directive(outposttest.ScenarioTool)},
				gateway.GrantSpec{Price: perToken, Budget: budget}, nil, nil)
			require.Error(t, err, "the turn stopped")
			name, _ := outposttest.ToolFile(mark)
			_, statErr := os.Stat(filepath.Join(ws, name))
			assert.NoError(t, statErr, "the tool call before the cap ran")

			assert.Len(t, f.srv.ModelRequests(), 1, "the upstream answered only the request that crossed the cap")
			assert.Equal(t, []int{200, gateway.BudgetStatus}, snap.Statuses, "refused once, not retried")
			assert.True(t, snap.BudgetExceeded)
			ev, ok := snap.Evidence()
			require.True(t, ok)
			assert.Equal(t, gateway.EvidenceBudget, ev.Kind)
			assert.Positive(t, snap.Usage.CostUSD)
			// The CLI surfaced the gateway's words; today the harness reads
			// them as a process failure (see gateway's package doc for the
			// proposed budget class).
			assert.Contains(t, res.Outcome().Error, gateway.BudgetMarker)
			assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
		})
	}
}

// TestGatewayBudgetHoldsAgainstTheLease: code in the lease that bypasses
// its CLI and sends large requests straight to the gateway with its
// placeholder meets the turn's cost cap there: the upstream answers only
// until the spend crosses the cap (requests go one at a time, so nothing
// else is in flight), the next request is refused, the harness stops the
// turn at once as budget "cost" — the flood, which would outlast the
// turn's deadline, never finishes — and the turn's usage of record is the
// gateway's.
func TestGatewayBudgetHoldsAgainstTheLease(t *testing.T) {
	f := newGWFixture(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	ws := workspace(t)
	sb, err := f.provider.Acquire(context.Background(), sandbox.Spec{Workspace: ws,
		Mounts:   []sandbox.Mount{{Source: exe, Target: fakeInContainer, ReadOnly: true}},
		Forwards: []sandbox.Forward{{Socket: f.sock, Port: gateway.DefaultLeasePort}}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })

	const capUSD = 0.05
	var texts []string
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: fakecli.New(fakeInContainer), Sandbox: sb, KeepEvents: true,
		// So many that, were the turn not stopped, the deadline would.
		Input: adapters.Input{Prompt: "flood 1000000 200000",
			Endpoint: &adapters.Endpoint{BaseURL: f.srv.URL(), APIKey: gwMarker}},
		Gateway: &harness.Bridge{Gateway: f.gw, URL: gateway.LeaseURL(gateway.DefaultLeasePort), Endpoint: true},
		Limits:  harness.Limits{MaxCostUSD: capUSD, Deadline: 3 * time.Minute},
		OnEvent: func(ev adapters.Event) {
			if ev.Kind == adapters.KindText {
				texts = append(texts, ev.Text)
			}
		},
	})
	require.Error(t, err)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err), "%v", err)
	assert.Equal(t, "cost", outposterr.BudgetReason(err), "%v", err)
	assert.Equal(t, outpostcli.ExitBudget, outpostcli.ExitCodeOf(err))
	assert.NotContains(t, texts, "flood done", "the turn was stopped, not run to its end")

	answered := f.srv.Requests()
	require.NotEmpty(t, answered)
	assert.Equal(t, "gateway", res.UsageSource)
	require.True(t, res.Usage.CostKnown)
	// The cap was crossed by the last answered request, not before it.
	per := res.Usage.CostUSD / float64(len(answered))
	assert.GreaterOrEqual(t, res.Usage.CostUSD, capUSD)
	assert.Less(t, res.Usage.CostUSD-per, capUSD, "no request started after the spend reached the cap")
	assert.Contains(t, texts, fmt.Sprintf("flood: %d", gateway.BudgetStatus), "the lease saw the refusal")
	for _, tx := range texts {
		assert.NotContains(t, tx, gwMarker)
	}
}
