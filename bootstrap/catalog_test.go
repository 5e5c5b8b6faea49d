package bootstrap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestDefaultCatalog(t *testing.T) {
	c := DefaultCatalog()
	assert.Equal(t, []string{"agy", "claude", "codex", "copilot"}, c.Names())
	for _, r := range c.Rows() {
		require.NoError(t, r.Validate(), r.Name)
	}
	want := map[string]struct {
		version, pkg, npmVersion, bin, line string
	}{
		"claude":  {"2.1.328", "@anthropic-ai/claude-code-linux-x64", "2.1.328", "claude", "2.1.328 (Claude Code)"},
		"codex":   {"0.169.0", "@openai/codex", "0.169.0-linux-x64", "bin/codex", "codex-cli 0.169.0"},
		"copilot": {"1.0.102", "@github/copilot-linux-x64", "1.0.102", "copilot", "GitHub Copilot CLI 1.0.102."},
	}
	for name, w := range want {
		r, ok := c.Row(name)
		require.True(t, ok)
		s := r.Sources[LinuxX64]
		assert.Equal(t, w.version, r.Version)
		assert.Equal(t, w.version, Pinned(name), "Pinned reads the catalog's row")
		assert.Equal(t, w.pkg, s.Package)
		assert.Equal(t, w.npmVersion, s.NPMVersion(r.Version))
		_, bin := r.Layout(LinuxX64)
		assert.Equal(t, w.bin, bin)
		assert.Equal(t, w.line, strings.Replace(r.VersionLine, "%s", r.Version, 1))
		assert.True(t, strings.HasPrefix(s.Integrity, "sha512-"))
		assert.Contains(t, r.Sources, LinuxARM64)
	}
	assert.Empty(t, Pinned("agy"), "Antigravity has no built-in pin")
	assert.Empty(t, Pinned("nope"))
	for _, name := range []string{"claude", "codex"} {
		r, _ := c.Row(name)
		assert.Contains(t, r.Sources, LinuxX64Musl, name)
		assert.Contains(t, r.Sources, LinuxARM64Musl, name)
	}
	copilot, _ := c.Row("copilot")
	assert.NotContains(t, copilot.Sources, LinuxX64Musl, "Copilot publishes no musl build")
	agy, _ := c.Row("agy")
	assert.Empty(t, agy.Sources)
	assert.Equal(t, "agy", agy.Command())
	members, _ := agy.Layout(LinuxX64)
	assert.Equal(t, []Member{{From: "antigravity", To: "agy"}}, members)
}

func TestCatalogOverride(t *testing.T) {
	c := DefaultCatalog()
	hex := strings.Repeat("ab", 64)

	// Re-pin claude to another version: other platforms' digests are dropped.
	c2, err := c.Override("claude", Pin{Platform: LinuxX64, Version: "2.1.400", Integrity: hex})
	require.NoError(t, err)
	r, _ := c2.Row("claude")
	assert.Equal(t, "2.1.400", r.Version)
	require.Len(t, r.Sources, 1)
	assert.Equal(t, "@anthropic-ai/claude-code-linux-x64", r.Sources[LinuxX64].Package)
	d, err := ParseIntegrity(hex)
	require.NoError(t, err)
	assert.Equal(t, d.String(), r.Sources[LinuxX64].Integrity)
	// The original is untouched.
	orig, _ := c.Row("claude")
	assert.Equal(t, "2.1.328", orig.Version)
	assert.Len(t, orig.Sources, 4)

	// Same version, new digest: other platforms stay.
	c3, err := c.Override("codex", Pin{Platform: LinuxX64, Integrity: hex})
	require.NoError(t, err)
	r, _ = c3.Row("codex")
	assert.Len(t, r.Sources, 4)
	assert.Equal(t, d.String(), r.Sources[LinuxX64].Integrity)
	assert.NotEqual(t, d.String(), r.Sources[LinuxX64Musl].Integrity)

	// A URL turns an npm source into an archive download.
	c4, err := c.Override("copilot", Pin{Platform: LinuxX64, URL: "https://mirror.example/copilot.tgz", Integrity: hex})
	require.NoError(t, err)
	r, _ = c4.Row("copilot")
	assert.Empty(t, r.Sources[LinuxX64].Package)
	assert.Equal(t, "https://mirror.example/copilot.tgz", r.Sources[LinuxX64].URL)

	// Antigravity needs a URL.
	_, err = c.Override("agy", Pin{Platform: LinuxX64, Version: "1.2.12", Integrity: hex})
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	c5, err := c.Override("agy", Pin{Platform: LinuxX64, Version: "1.2.12", URL: "https://x.example/cli_linux_x64.tar.gz", Integrity: hex})
	require.NoError(t, err)
	r, _ = c5.Row("agy")
	assert.Equal(t, "1.2.12", r.Version)

	for _, bad := range []Pin{
		{Platform: LinuxX64, Integrity: "sha256-abc"},
		{Platform: LinuxX64, Integrity: ""},
		{Platform: LinuxX64, Integrity: hex, Version: "../x"},
		{Platform: LinuxX64, Integrity: hex, URL: "file:///etc/passwd"},
	} {
		_, err := c.Override("claude", bad)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%+v: %v", bad, err)
	}
	_, err = c.Override("nope", Pin{Integrity: hex})
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
}

func TestCatalogWith(t *testing.T) {
	hex := strings.Repeat("01", 64)
	row := Row{
		Name: "kimi", Version: "1.0.0", Bin: "bin/kimi",
		Members: []Member{{From: "package/", To: ""}},
		Sources: map[Platform]Source{LinuxX64: {URL: "https://x.example/kimi.tgz", Integrity: hex}},
	}
	c, err := DefaultCatalog().With(row)
	require.NoError(t, err)
	assert.Contains(t, c.Names(), "kimi")
	assert.NotContains(t, DefaultCatalog().Names(), "kimi")

	bad := []func(r *Row){
		func(r *Row) { r.Name = "../x" },
		func(r *Row) { r.Version = "1/2" },
		func(r *Row) { r.Bin = "/bin/kimi" },
		func(r *Row) { r.Bin = "a/../../kimi" },
		func(r *Row) { r.Members = nil },
		func(r *Row) { r.Members = []Member{{From: "../", To: ""}} },
		func(r *Row) { r.Members = []Member{{From: "package/", To: "x"}} },
		func(r *Row) { r.Members = []Member{{From: "package/kimi", To: "/kimi"}} },
		func(r *Row) { r.VersionLine = "no verb" },
		func(r *Row) {
			r.Sources = map[Platform]Source{LinuxX64: {URL: "https://x", Package: "kimi", Integrity: hex}}
		},
		func(r *Row) { r.Sources = map[Platform]Source{LinuxX64: {Package: "Bad Name", Integrity: hex}} },
		func(r *Row) { r.Sources = map[Platform]Source{LinuxX64: {URL: "https://x", Integrity: "md5-x"}} },
	}
	for i, mutate := range bad {
		r := row.clone()
		mutate(&r)
		_, err := DefaultCatalog().With(r)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "case %d: %v", i, err)
	}
}

func TestParseIntegrity(t *testing.T) {
	const claude = "sha512-KuzL+dBHgDCFTHJxwW+xuBJdVKfBsesGx2BBcTOG9sYDGoAD7b1hUV8rsTS4xjoJsB2SmeGraGjBiFuhrYuC9w=="
	d, err := ParseIntegrity(claude)
	require.NoError(t, err)
	assert.Equal(t, claude, d.String())
	d2, err := ParseIntegrity("sha1-abc= " + claude + "?opt")
	require.NoError(t, err)
	assert.True(t, d.Equal(d2))
	hexForm := "2aeccbf9d047803085" + strings.Repeat("0", 110)
	_, err = ParseIntegrity(hexForm)
	require.NoError(t, err)
	_, err = ParseIntegrity("sha512:" + hexForm)
	require.NoError(t, err)
	for _, bad := range []string{"", "sha512-", "sha512-abc", "sha256-" + claude[7:], strings.Repeat("z", 128)} {
		_, err := ParseIntegrity(bad)
		assert.Error(t, err, bad)
	}
}

// TestNPMLauncher: how npm installs a pin by hand, for scripts/install-clis.sh:
// a platform package's single native file, else the launcher's own command.
func TestNPMLauncher(t *testing.T) {
	c := DefaultCatalog()
	for name, want := range map[string][3]string{
		"claude":  {"@anthropic-ai/claude-code@2.1.328", "@anthropic-ai/claude-code-linux-x64/claude", "2.1.328 (Claude Code)"},
		"codex":   {"@openai/codex@0.169.0", ".bin/codex", "codex-cli 0.169.0"},
		"copilot": {"@github/copilot@1.0.102", "@github/copilot-linux-x64/copilot", "GitHub Copilot CLI 1.0.102."},
	} {
		r, _ := c.Row(name)
		spec, bin, ok := r.NPMLauncher(LinuxX64)
		require.True(t, ok, name)
		assert.Equal(t, want, [3]string{spec, bin, r.WantVersion()}, name)
	}
	agy, _ := c.Row("agy")
	_, _, ok := agy.NPMLauncher(LinuxX64)
	assert.False(t, ok, "not on npm")
	copilot, _ := c.Row("copilot")
	_, _, ok = copilot.NPMLauncher(LinuxX64Musl)
	assert.False(t, ok, "no source for the platform")
	assert.Equal(t, "1.2", Row{Version: "1.2"}.WantVersion())

	nc, err := NewCatalog(copilot)
	require.NoError(t, err)
	assert.Equal(t, []string{"copilot"}, nc.Names(), "exactly the rows given")
	_, err = NewCatalog(copilot, copilot)
	assert.ErrorContains(t, err, "given twice")
	copilot.Launcher = "Not A Package"
	_, err = NewCatalog(copilot)
	assert.ErrorContains(t, err, "invalid npm launcher package")
}
