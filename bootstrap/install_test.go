package bootstrap

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestInstallReplacesWrongVersion puts a binary that reports another
// version where the CLI belongs: Install must replace it, not trust it.
func TestInstallReplacesWrongVersion(t *testing.T) {
	srv := newServer(t)
	archive := agyArchive(t, "1.2.12")
	b := newBootstrapper(t, Options{Catalog: agyCatalog(t, srv.put("/a.tar.gz", archive), sri(archive))})
	e, err := b.Ensure(context.Background(), "agy")
	require.NoError(t, err)

	sb := hostSandbox(t)
	dir := filepath.Join(sb.Home(), "bin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	stale := filepath.Join(dir, "agy")
	require.NoError(t, os.WriteFile(stale, []byte(fakeCLI("antigravity 1.2.11")), 0o755))

	_, err = b.Check(context.Background(), sb, "agy", stale)
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
	assert.Contains(t, err.Error(), `reports "antigravity 1.2.11", want "1.2.12"`)

	bin, err := b.Install(context.Background(), sb, e, dir)
	require.NoError(t, err)
	assert.Equal(t, stale, bin)
	got, err := os.ReadFile(bin)
	require.NoError(t, err)
	assert.Equal(t, fakeCLI("antigravity 1.2.12"), string(got))
	line, err := b.Check(context.Background(), sb, "agy", bin)
	require.NoError(t, err)
	assert.Equal(t, "antigravity 1.2.12", line)

	// A binary with the pinned version is accepted as it is.
	bin2, err := b.Install(context.Background(), sb, e, dir)
	require.NoError(t, err)
	assert.Equal(t, bin, bin2)
}

func TestCheckFailures(t *testing.T) {
	sb := hostSandbox(t)
	b := newBootstrapper(t, Options{})
	write := func(name, script string) string {
		p := filepath.Join(sb.Home(), name)
		require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
		return p
	}
	tests := []struct {
		name, bin, want string
	}{
		{"missing", filepath.Join(sb.Home(), "nope"), "check claude"},
		{"fails", write("fails", "#!/bin/sh\necho boom >&2\nexit 3\n"), "exit 3: boom"},
		{"wrong version", write("wrong", fakeCLI("2.1.327 (Claude Code)")), `reports "2.1.327 (Claude Code)"`},
		{"prefix only", write("prefix", fakeCLI("2.1.3280 (Claude Code)")), "want \"2.1.328 (Claude Code)\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Check(context.Background(), sb, "claude", tc.bin)
			require.Error(t, err)
			assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	ok := write("ok", fakeCLI("2.1.328 (Claude Code)"))
	line, err := b.Check(context.Background(), sb, "claude", ok)
	require.NoError(t, err)
	assert.Equal(t, "2.1.328 (Claude Code)", line)
}

func TestMatchVersion(t *testing.T) {
	tests := []struct {
		out, version, line string
		ok                 bool
	}{
		{"2.1.328 (Claude Code)\n", "2.1.328", "%s (Claude Code)", true},
		{"2.1.3280 (Claude Code)\n", "2.1.328", "%s (Claude Code)", false},
		{"WARNING: proceeding\ncodex-cli 0.169.0\n", "0.169.0", "codex-cli %s", true},
		{"codex-cli 0.169.0-alpha.1\n", "0.169.0", "codex-cli %s", false},
		{"GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n", "1.0.102", "GitHub Copilot CLI %s.", true},
		{"GitHub Copilot CLI 1.0.103.\n", "1.0.102", "GitHub Copilot CLI %s.", false},
		{"antigravity 1.2.12\n", "1.2.12", "", true},
		{"antigravity v1.2.12.\n", "1.2.12", "", false},
		{"antigravity 1.2.12.\n", "1.2.12", "", true},
		{"antigravity 1.2.123\n", "1.2.12", "", false},
		{"antigravity 11.2.12\n", "1.2.12", "", false},
		{"antigravity 1.2.12-rc1\n", "1.2.12", "", false},
		{"antigravity 1.2.12.4\n", "1.2.12", "", false},
		{"", "1.2.12", "", false},
	}
	for _, tc := range tests {
		_, ok := matchVersion(tc.out, tc.version, tc.line)
		assert.Equal(t, tc.ok, ok, "%q", tc.out)
	}
}
