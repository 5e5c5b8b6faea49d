// Package testenv gates integration tests on what the machine has.
//
// Locally a test that needs Docker, a Kubernetes cluster or a real agent CLI
// skips with a clear message when it is missing. In CI,
// OUTPOST_REQUIRE_DOCKER=1, OUTPOST_REQUIRE_KUBERNETES=1 and
// OUTPOST_REQUIRE_CLIS=1 (and OUTPOST_REQUIRE_CHROMIUM=1 for the browser test
// of the HTML report, OUTPOST_REQUIRE_PODMAN=1 and
// OUTPOST_REQUIRE_REMOTE_ENGINES=1 for the engines of
// scripts/engines-setup.sh) turn those skips into failures, so an integration
// test can never pass by not running.
package testenv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireDockerEnv is the variable that makes missing Docker a failure.
const RequireDockerEnv = "OUTPOST_REQUIRE_DOCKER"

// RequireCLIsEnv is the variable that makes missing real CLIs a failure.
const RequireCLIsEnv = "OUTPOST_REQUIRE_CLIS"

// RequirePodmanEnv is the variable that makes a missing Podman API service
// (scripts/engines-setup.sh) a failure.
const RequirePodmanEnv = "OUTPOST_REQUIRE_PODMAN"

// RequireRemoteEnginesEnv is the variable that makes a missing remote
// engine (the ssh:// engine of scripts/engines-setup.sh) a failure.
const RequireRemoteEnginesEnv = "OUTPOST_REQUIRE_REMOTE_ENGINES"

// RequireToolsEnv is the variable that makes a missing measuring tool
// (GNU time, chromium) a failure.
const RequireToolsEnv = "OUTPOST_REQUIRE_TOOLS"

// RequireKubernetesEnv is the variable that makes a missing Kubernetes
// cluster a failure.
const RequireKubernetesEnv = "OUTPOST_REQUIRE_KUBERNETES"

// KubeconfigEnv names the kubeconfig of the test cluster
// (scripts/kube-setup.sh prints the path to use). KUBECONFIG is not read:
// tests create and delete pods, and must not do so in whatever cluster a
// developer's shell points at.
const KubeconfigEnv = "OUTPOST_KUBECONFIG"

// Required reports whether the named requirement variable is set to 1/true.
func Required(env string) bool {
	switch os.Getenv(env) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// Missing skips t, or fails it when env demands the requirement.
func Missing(t testing.TB, env, what string) {
	t.Helper()
	if Required(env) {
		t.Fatalf("%s is required (%s=1) but unavailable", what, env)
	}
	t.Skipf("skipping: %s unavailable (set %s=1 to make this a failure)", what, env)
}

// CLI returns the path of the real agent CLI binary name (claude, codex,
// copilot), from OUTPOST_<NAME>_BIN or PATH, or skips/fails the test.
func CLI(t testing.TB, name string) string {
	t.Helper()
	if p := os.Getenv("OUTPOST_" + upper(name) + "_BIN"); p != "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, RequireCLIsEnv, "the real "+name+" CLI")
		return ""
	}
	return invocable(p, name)
}

// invocable follows the symlink chain from p and returns its last hop still
// named name, made absolute: its directory can go on a sandbox's PATH (an
// install's bin/ of links resolves into the package), while a chain ending
// in a launcher script (codex → codex.js) stops at the link beside it.
func invocable(p, name string) string {
	p, _ = filepath.Abs(p)
	best := p
	for range 40 {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
		if filepath.Base(p) == name {
			best = p
		}
	}
	return best
}

// Kubeconfig returns the path of the test cluster's kubeconfig, from
// OUTPOST_KUBECONFIG, or skips/fails the test when it is unset or the file
// does not exist. Whether the cluster
// answers is for the caller to check (and report with [Missing]).
func Kubeconfig(t testing.TB) string {
	t.Helper()
	p := os.Getenv(KubeconfigEnv)
	if p == "" {
		Missing(t, RequireKubernetesEnv, "a Kubernetes cluster ("+KubeconfigEnv+" is unset; export "+KubeconfigEnv+"=$(bash scripts/kube-setup.sh))")
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		Missing(t, RequireKubernetesEnv, "a Kubernetes cluster (kubeconfig "+p+": "+err.Error()+")")
		return ""
	}
	return p
}

// Short skips long-running integration tests under -short.
func Short(t testing.TB) {
	t.Helper()
	if testing.Short() && !Required(RequireCLIsEnv) && !Required(RequireDockerEnv) && !Required(RequireKubernetesEnv) &&
		!Required(RequirePodmanEnv) && !Required(RequireRemoteEnginesEnv) {
		t.Skip("skipping integration test in -short mode")
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// RequireChromiumEnv is the variable that makes a missing Chromium a failure.
const RequireChromiumEnv = "OUTPOST_REQUIRE_CHROMIUM"

// Chromium returns the path of a Chromium browser (OUTPOST_CHROMIUM_BIN, or
// chromium / chromium-browser / google-chrome on PATH), or skips the test —
// fails it when OUTPOST_REQUIRE_CHROMIUM=1.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OUTPOST_CHROMIUM_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, RequireChromiumEnv, "a Chromium browser (Debian: apt-get install chromium)")
	return ""
}

// PodmanHost is the address of the Podman API service the tests use:
// OUTPOST_PODMAN_HOST, else unix:///run/podman/podman.sock (where
// scripts/engines-setup.sh starts it).
func PodmanHost() string {
	if h := os.Getenv("OUTPOST_PODMAN_HOST"); h != "" {
		return h
	}
	return "unix:///run/podman/podman.sock"
}

// SSHEngine returns the ssh:// address of a Docker engine reached through
// ssh and the ssh flags to reach it (OUTPOST_SSH_DOCKER_HOST and
// OUTPOST_SSH_CONFIG, printed by scripts/engines-setup.sh), or skips the
// test (fails it with OUTPOST_REQUIRE_REMOTE_ENGINES=1).
func SSHEngine(t testing.TB) (host string, sshFlags []string) {
	t.Helper()
	host = os.Getenv("OUTPOST_SSH_DOCKER_HOST")
	if host == "" {
		Missing(t, RequireRemoteEnginesEnv, "an ssh:// Docker engine (run scripts/engines-setup.sh and export the variables it prints)")
		return "", nil
	}
	if cfg := os.Getenv("OUTPOST_SSH_CONFIG"); cfg != "" {
		sshFlags = []string{"-F", cfg}
	}
	return host, sshFlags
}

// OtherPIDNamespace runs this test binary's test helper (a test that runs
// only with env=1 set) as a child in a new pid namespace (unshare --pid
// --fork --mount-proc), decodes the one JSON value it prints into v, and
// ends the child when the test ends (closing its input). It skips without
// root or unshare, or where no pid namespace can be made.
func OtherPIDNamespace(t testing.TB, helper, env string, v any) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs unshare and root to start a process in a new pid namespace")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^"+helper+"$")
	cmd.Env = append(os.Environ(), env+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	if err := json.NewDecoder(out).Decode(v); err != nil {
		t.Skipf("no pid namespace here: %v", err)
	}
}
