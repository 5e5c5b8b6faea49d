package install

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

const marker = "outpost-marker-secret-c0ffee"

func hostLease(t *testing.T) sandbox.Sandbox {
	t.Helper()
	p := host.New(host.Options{Env: map[string]string{"PATH": "/usr/bin:/bin"}, TempDir: t.TempDir()})
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Release(context.Background()) })
	return sb
}

func dockerLease(t *testing.T) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := docker.New(ctx, docker.Options{Network: "none", RunID: "cred-" + uuid.NewString(), Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	t.Cleanup(func() { _ = p.ReleaseAll(context.Background()); _ = p.Close() })
	sb, err := p.Acquire(ctx, sandbox.Spec{})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker lease ("+err.Error()+")")
	}
	t.Cleanup(func() { _ = sb.Release(context.Background()) })
	return sb
}

func writeHost(t *testing.T, home, rel, content string) string {
	t.Helper()
	p := filepath.Join(home, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func sh(t *testing.T, sb sandbox.Sandbox, script string) string {
	t.Helper()
	p, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sh", "-c", script}})
	require.NoError(t, err)
	defer p.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = out.ReadFrom(p.Stdout()); close(done) }()
	_, _ = p.Wait()
	<-done
	return out.String()
}

func TestReadHostFile(t *testing.T) {
	dir := t.TempDir()
	f := credentials.HostFile{Path: "x", Login: "tool login", Alternative: "TOKEN"}
	_, err := ReadHostFile(filepath.Join(dir, "missing"), f, "agent")
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "tool login")
	assert.Contains(t, err.Error(), "TOKEN")

	real := writeHost(t, dir, "real.json", `{"a":1}`)
	require.NoError(t, os.Symlink(real, filepath.Join(dir, "link.json")))
	_, err = ReadHostFile(filepath.Join(dir, "link.json"), f, "agent")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")

	big := writeHost(t, dir, "big.json", strings.Repeat("x", MaxFileBytes+1))
	_, err = ReadHostFile(big, f, "agent")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")

	b, err := ReadHostFile(real, f, "agent")
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(b))
}

func TestHostSandboxGetsVariablesOnly(t *testing.T) {
	sb := hostLease(t)
	home := t.TempDir()
	writeHost(t, home, ".tool/token", marker+"\n")
	writeHost(t, home, ".tool/login.json", `{"t":"`+marker+`"}`)

	inst, err := Materialize(context.Background(), sb, credentials.Plan{
		Env:   map[string]string{"A": "1"},
		Files: []credentials.HostFile{{Path: ".tool/token", DestVar: "TOOL_TOKEN"}},
	}, credentials.ConfigPlan{}, Options{Agent: "tool", HostHome: home})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"A": "1", "TOOL_TOKEN": marker}, inst.Env)
	assert.Equal(t, []string{marker}, inst.Secrets, "a file's token is a secret to keep out of output")

	_, err = Materialize(context.Background(), sb, credentials.Plan{
		Files: []credentials.HostFile{{Path: ".tool/login.json", Dest: ".tool/login.json"}},
	}, credentials.ConfigPlan{}, Options{Agent: "tool", HostHome: home})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "variables only")
	_, err = os.Stat(filepath.Join(sb.Home(), ".tool"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written into the host lease")

	_, err = Materialize(context.Background(), sb, credentials.Plan{Logins: []credentials.Login{{Args: []string{"true"}}}},
		credentials.ConfigPlan{}, Options{Agent: "tool"})
	require.Error(t, err)
}

// TestWritePrivateDir: the directory is 0700 and each file 0600 with its
// content; a name that is not a plain file name writes nothing.
func TestWritePrivateDir(t *testing.T) {
	sb := hostLease(t)
	dir := filepath.Join(sb.Home(), ".outpost-private")
	require.NoError(t, WritePrivateDir(context.Background(), sb, dir, []PrivateFile{
		{Name: "a.json", Data: []byte("{}")}, {Name: "empty"},
	}))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, st.Mode()&(os.ModeDir|os.ModePerm))
	for name, content := range map[string]string{"a.json": "{}", "empty": ""} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode(), name)
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, content, string(b), name)
	}

	for _, name := range []string{"", ".", "..", "../x", "d/x"} {
		other := filepath.Join(sb.Home(), ".outpost-refused")
		err := WritePrivateDir(context.Background(), sb, other, []PrivateFile{{Name: name}})
		require.Error(t, err, "%q", name)
		assert.NoDirExists(t, other, "%q: nothing copied", name)
	}
}

func TestDockerMaterialize(t *testing.T) {
	testenv.Short(t)
	sb := dockerLease(t)
	home := t.TempDir()
	writeHost(t, home, ".tool/login.json", `{"token":"`+marker+`","extra":"host-only"}`)
	plan := credentials.Plan{
		Env: map[string]string{"TOOL_KEY": marker},
		Files: []credentials.HostFile{{Path: ".tool/login.json", Dest: ".tool/login.json",
			Project: func(b []byte) ([]byte, error) { return bytes.ReplaceAll(b, []byte(`,"extra":"host-only"`), nil), nil }}},
		Generated: []credentials.Generated{{Dest: ".tool.json", Content: []byte(`{"onboarded":true}`)}},
		Logins: []credentials.Login{{Args: []string{"sh", "-c", `umask 077; cat > "$HOME/.login-stdin"; printenv TOOL_KEY > "$HOME/.login-env"`},
			StdinVar: "TOOL_KEY"}},
	}
	config := credentials.ConfigPlan{Files: []credentials.ConfigFile{{Dest: ".tool/config.json", Section: []string{"mcpServers"},
		Entries: map[string]any{"docs": map[string]any{"url": "http://127.0.0.1:1"}}}}}
	inst, err := Materialize(context.Background(), sb, plan, config, Options{Agent: "tool", HostHome: home})
	require.NoError(t, err)
	assert.Equal(t, marker, inst.Env["TOOL_KEY"])
	assert.Equal(t, []string{marker}, inst.Secrets, "the installed file's token, as projected")

	listing := sh(t, sb, `cd "$HOME" && stat -c '%a %u %n' .tool .tool/login.json .tool.json .tool/config.json && cat .tool/login.json; echo; cat .login-stdin; echo; cat .login-env; cat .tool/config.json; ls -a`)
	uid := strings.TrimSpace(sh(t, sb, "id -u"))
	assert.Contains(t, listing, "700 "+uid+" .tool\n")
	assert.Contains(t, listing, "600 "+uid+" .tool/login.json\n")
	assert.Contains(t, listing, "600 "+uid+" .tool.json\n")
	assert.Contains(t, listing, "600 "+uid+" .tool/config.json\n")
	assert.Contains(t, listing, `{"token":"`+marker+`"}`, "projected content installed")
	assert.NotContains(t, listing, "host-only")
	assert.Equal(t, 3, strings.Count(listing, marker), "login got the secret on stdin and in its environment")
	assert.Contains(t, listing, `"docs"`)
	assert.NotContains(t, listing, ".outpost-install-", "staging directory removed")

	// Symlinked and oversized host credentials are refused; nothing lands.
	real := writeHost(t, home, ".tool/real.json", `{}`)
	require.NoError(t, os.Symlink(real, filepath.Join(home, ".tool", "link.json")))
	writeHost(t, home, ".tool/big.json", strings.Repeat("y", MaxFileBytes+10))
	for _, name := range []string{"link.json", "big.json"} {
		_, err := Materialize(context.Background(), sb, credentials.Plan{Files: []credentials.HostFile{{Path: ".tool/" + name, Dest: ".tool/" + name}}},
			credentials.ConfigPlan{}, Options{Agent: "tool", HostHome: home})
		require.Error(t, err, name)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
		assert.NotContains(t, sh(t, sb, `ls -a "$HOME/.tool"`), name)
	}

	// A failing login is a configuration error without the secret in it.
	_, err = Materialize(context.Background(), sb, credentials.Plan{Env: map[string]string{"K": marker},
		Logins: []credentials.Login{{Args: []string{"sh", "-c", `echo "bad key $K" >&2; exit 3`}, StdinVar: "K"}}},
		credentials.ConfigPlan{}, Options{Agent: "tool"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "login command")
	assert.NotContains(t, err.Error(), marker)
}

// TestWriteBackOnceUnderConcurrency refreshes one login in many sandboxes
// at once: the host file is written exactly once, atomically, keeping its
// host-only keys.
func TestWriteBackOnceUnderConcurrency(t *testing.T) {
	home := t.TempDir()
	hostPath := writeHost(t, home, ".tool/login.json", `{"exp":1,"keep":"host"}`)
	f := credentials.HostFile{Path: ".tool/login.json", Dest: ".tool/login.json", Rotates: true,
		Fresher: func(h, s []byte) bool {
			return bytes.Contains(s, []byte(`"exp":2`)) && !bytes.Contains(h, []byte(`"exp":2`))
		},
		Merge: func(h, s []byte) ([]byte, error) { return []byte(`{"exp":2,"keep":"host"}`), nil }}
	const n = 8
	var leases []Rotating
	for range n {
		sb := hostLease(t)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		content := []byte(`{"exp":2}`)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: ".tool/", Mode: 0o700, Typeflag: tar.TypeDir}))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: ".tool/login.json", Mode: 0o600, Size: int64(len(content)), Typeflag: tar.TypeReg}))
		_, _ = tw.Write(content)
		require.NoError(t, tw.Close())
		require.NoError(t, sb.CopyIn(context.Background(), sb.Home(), &buf))
		leases = append(leases, Rotating{HostPath: hostPath, SandboxPath: filepath.Join(sb.Home(), ".tool/login.json"), file: f})
	}
	reader := hostLease(t) // a host lease can read any path on the host
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for i := range n {
		wg.Go(func() {
			k, err := WriteBack(context.Background(), reader, []Rotating{leases[i]})
			assert.NoError(t, err)
			mu.Lock()
			total += k
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, 1, total, "written exactly once")
	got, err := os.ReadFile(hostPath)
	require.NoError(t, err)
	assert.JSONEq(t, `{"exp":2,"keep":"host"}`, string(got))
	st, err := os.Stat(hostPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// An older or invalid sandbox copy is never written back.
	k, err := WriteBack(context.Background(), reader, []Rotating{leases[0]})
	require.NoError(t, err)
	assert.Zero(t, k)
}

func TestExclusiveLoginRefusesFanOut(t *testing.T) {
	testenv.Short(t)
	home := t.TempDir()
	writeHost(t, home, ".codex/auth.json", `{"tokens":{"access_token":"a","refresh_token":"r"}}`)
	plan := credentials.Plan{Files: []credentials.HostFile{{Path: ".codex/auth.json", Dest: ".codex/auth.json", Exclusive: true}}}
	a, b := dockerLease(t), dockerLease(t)
	first, err := Materialize(context.Background(), a, plan, credentials.ConfigPlan{}, Options{Agent: "codex", HostHome: home})
	require.NoError(t, err)
	_, err = Materialize(context.Background(), b, plan, credentials.ConfigPlan{}, Options{Agent: "codex", HostHome: home})
	require.Error(t, err, "a second concurrent sandbox is refused")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "in use by another sandbox")

	shared, err := Materialize(context.Background(), b, plan, credentials.ConfigPlan{}, Options{Agent: "codex", HostHome: home, ShareLogins: true})
	require.NoError(t, err, "the caller may opt in")
	shared.Close()

	first.Close()
	again, err := Materialize(context.Background(), b, plan, credentials.ConfigPlan{}, Options{Agent: "codex", HostHome: home})
	require.NoError(t, err, "released after the first turn")
	again.Close()
}
