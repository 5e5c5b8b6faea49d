// Package e2e runs the real agent CLIs end to end: the harness, a sandbox
// (host and Docker), the adapter, and the outposttest scripted model server
// on loopback. The tests skip when the CLI or Docker is missing, and fail
// instead in CI (OUTPOST_REQUIRE_CLIS=1, OUTPOST_REQUIRE_DOCKER=1).
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// env is one sandbox flavour the Claude tests run in.
type env struct {
	name     string
	provider sandbox.Provider
	spec     sandbox.Spec
	// processes lists the command lines running in sb (host: the machine).
	processes func(t *testing.T, sb sandbox.Sandbox) string
}

func hostEnv(t *testing.T, bin string) env {
	return env{
		name: "host",
		provider: host.New(host.Options{TempDir: t.TempDir(),
			Env: map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin", "TZ": "UTC"}}),
		processes: hostProcesses,
	}
}

// hostProcesses lists the command lines of the processes working in sb's
// root on this machine: the lease's, not another test's or another user's
// CLI of the same name (container and pod processes show here too).
func hostProcesses(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(sb.Root())
	require.NoError(t, err)
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var b strings.Builder
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", d.Name(), "cwd"))
		if err != nil || (cwd != root && !strings.HasPrefix(cwd, root+"/")) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		b.WriteString(strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
		b.WriteByte('\n')
	}
	return b.String()
}

func dockerEnv(t *testing.T, bin string) env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := docker.New(ctx, docker.Options{Network: "host", RunID: "e2e-" + uuid.NewString(), Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	if _, err := p.Client().ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "image "+docker.DefaultImage+" (run scripts/docker-setup.sh)")
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		assert.Empty(t, p.Live(), "leases left behind")
		_ = p.Close()
	})
	return env{
		name:     "docker",
		provider: p,
		spec: sandbox.Spec{
			// Until bootstrap installs verified copies, the host binary is mounted.
			Mounts: []sandbox.Mount{{Source: bin, Target: "/opt/outpost/bin/claude", ReadOnly: true}},
			Env:    map[string]string{"PATH": "/opt/outpost/bin:/usr/local/bin:/usr/bin:/bin"},
		},
		processes: func(t *testing.T, sb sandbox.Sandbox) string {
			p, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"ps", "-eo", "args"}})
			require.NoError(t, err)
			defer p.Close()
			out := readAll(p)
			_, _ = p.Wait()
			return out
		},
	}
}

func readAll(p sandbox.Process) string {
	var sb strings.Builder
	buf := make([]byte, 4096)
	r := p.Stdout()
	for {
		n, err := r.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

// workspace returns a directory the sandbox user can write.
func workspace(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777)) // leases of a root host run as uid 1000
	return dir
}

func envs(t *testing.T) []env {
	bin := testenv.CLI(t, "claude")
	return []env{hostEnv(t, bin), dockerEnv(t, bin)}
}

// turn runs one Claude turn against srv in lease sb.
func turn(t *testing.T, sb sandbox.Sandbox, srv *outposttest.Server, in adapters.Input, oauth bool) (*harness.Result, error) {
	t.Helper()
	ep := &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
	if oauth {
		ep = &adapters.Endpoint{BaseURL: srv.URL(), OAuthToken: outposttest.PlaceholderOAuthToken}
	}
	in.Endpoint = ep
	if in.MaxRetries == nil {
		one := 1
		in.MaxRetries = &one
	}
	return harness.Run(context.Background(), harness.Turn{
		Adapter: claude.New(), Input: in, Sandbox: sb, KeepEvents: true,
		Limits: harness.Limits{Deadline: 2 * time.Minute, IdleTimeout: time.Minute},
	})
}

func lease(t *testing.T, e env) sandbox.Sandbox {
	sb, _ := leaseIn(t, e)
	return sb
}

// leaseIn acquires a lease on a fresh workspace and returns both.
func leaseIn(t *testing.T, e env) (sandbox.Sandbox, string) {
	t.Helper()
	spec := e.spec
	spec.Workspace = workspace(t)
	sb, err := e.provider.Acquire(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sb.Release(context.Background())) })
	return sb, spec.Workspace
}

func server(t *testing.T, opts ...outposttest.Option) *outposttest.Server {
	srv, err := outposttest.NewServer(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func TestClaude(t *testing.T) {
	testenv.Short(t)
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Run("ok", func(t *testing.T) {
				srv := server(t)
				res, err := turn(t, lease(t, e), srv, adapters.Input{Prompt: "say MARK-ok1"}, false)
				require.NoError(t, err, "stderr: %s", resTail(res))
				assert.Contains(t, res.Text, "MARK-ok1")
				assert.NotEmpty(t, res.Conversation)
				assert.Equal(t, claude.Version, res.CLIVersion)
				assert.Positive(t, res.Usage.Input+res.Usage.CacheCreated)
				assert.Positive(t, res.Usage.CostUSD)
				assert.True(t, res.Usage.Complete)
			})
			t.Run("tool", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioTool))
				sb, ws := leaseIn(t, e)
				res, err := turn(t, sb, srv, adapters.Input{Prompt: "write MARK-tool1"}, false)
				require.NoError(t, err, "stderr: %s", resTail(res))
				name, content := outposttest.ToolFile("MARK-tool1")
				got, err := os.ReadFile(filepath.Join(ws, name))
				require.NoError(t, err, "the tool wrote the file in the workspace")
				assert.Equal(t, content, string(got))
				assert.Positive(t, res.Counts[adapters.KindTool])
				assert.Positive(t, res.Counts[adapters.KindToolResult])
			})
			t.Run("resume and fork", func(t *testing.T) {
				srv := server(t)
				sb := lease(t, e)
				r1, err := turn(t, sb, srv, adapters.Input{Prompt: "first MARK-r1"}, false)
				require.NoError(t, err)
				r2, err := turn(t, sb, srv, adapters.Input{Prompt: "second MARK-r2", Continue: r1.Conversation}, false)
				require.NoError(t, err, "stderr: %s", resTail(r2))
				assert.Contains(t, r2.Text, "remembered: MARK-r1", "turn 2 sees turn 1")
				assert.Equal(t, r1.Conversation, r2.Conversation)
				r3, err := turn(t, sb, srv, adapters.Input{Prompt: "branch MARK-f1", Continue: r1.Conversation, Fork: true}, false)
				require.NoError(t, err, "stderr: %s", resTail(r3))
				assert.NotEqual(t, r1.Conversation, r3.Conversation, "a fork is a new conversation")
				assert.Contains(t, r3.Text, "MARK-r1")
				last := srv.ModelRequests()[len(srv.ModelRequests())-1]
				assert.GreaterOrEqual(t, len(last.Messages), 3, "the server saw the earlier messages")
			})
			t.Run("quota", func(t *testing.T) {
				reset := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Hour)
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioQuota), outposttest.WithQuotaReset(reset))
				res, err := turn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-q"}, true)
				require.Error(t, err)
				assert.Equal(t, outposterr.Quota, outposterr.ClassOf(err), "%v", err)
				got, ok := outposterr.ResetAt(err)
				require.True(t, ok, "reset time known")
				assert.True(t, reset.Equal(got), "reset %s, want %s", got, reset)
				assert.NotEmpty(t, res.Conversation)
			})
			t.Run("overloaded", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioOverloaded))
				_, err := turn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-o"}, false)
				require.Error(t, err)
				assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
				assert.Equal(t, "overloaded", outposterr.UnavailableReason(err))
			})
			t.Run("unauthorized", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioUnauthorized))
				zero := 0
				_, err := turn(t, lease(t, e), srv, adapters.Input{Prompt: "MARK-u", MaxRetries: &zero}, false)
				require.Error(t, err)
				reason := outposterr.AuthReason(err)
				assert.True(t, outposterr.IsAuth(err), "%v", err)
				assert.NotEmpty(t, reason)
			})
			t.Run("cancel", func(t *testing.T) {
				srv := server(t, outposttest.WithScenario(outposttest.ScenarioHang))
				sb := lease(t, e)
				ctx, cancel := context.WithCancel(context.Background())
				marker := "MARK-cancel-" + e.name
				res, err := harness.Run(ctx, harness.Turn{
					Adapter: claude.New(),
					Input: adapters.Input{Prompt: marker, Endpoint: &adapters.Endpoint{BaseURL: srv.URL(),
						APIKey: outposttest.PlaceholderKey}},
					Sandbox: sb, Limits: harness.Limits{KillGrace: time.Second},
					OnEvent: func(ev adapters.Event) {
						if ev.Kind == adapters.KindConversation {
							// The CLI is waiting on the hanging server now.
							go func() { time.Sleep(300 * time.Millisecond); cancel() }()
						}
					},
				})
				cancel()
				require.Error(t, err)
				assert.Equal(t, outposterr.Aborted, outposterr.ClassOf(err))
				assert.NotEmpty(t, res.Conversation)
				assert.Eventually(t, func() bool {
					return !strings.Contains(e.processes(t, sb), "claude --print")
				}, 10*time.Second, 200*time.Millisecond, "no claude process left running")
			})
		})
	}
}

func resTail(r *harness.Result) string {
	if r == nil {
		return ""
	}
	return r.StderrTail + r.StdoutTail
}
