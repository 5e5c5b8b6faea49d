package bootstrap

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// Platform names an operating system and architecture the way the npm
// platform packages do ("linux-x64", "linux-arm64", "darwin-arm64").
type Platform string

// Platforms with rows in the default catalog.
const (
	LinuxX64       Platform = "linux-x64"
	LinuxARM64     Platform = "linux-arm64"
	LinuxX64Musl   Platform = "linux-x64-musl"
	LinuxARM64Musl Platform = "linux-arm64-musl"
)

// HostPlatform is the platform of the running program. Leases run the
// host's architecture, so it is also the right default for Docker sandboxes
// built on glibc images (the base image is Debian). glibc and musl are not
// told apart here; [DetectPlatform] asks a sandbox.
func HostPlatform() Platform {
	arch := runtime.GOARCH
	switch arch {
	case "amd64":
		arch = "x64"
	case "386":
		arch = "ia32"
	}
	return Platform(runtime.GOOS + "-" + arch)
}

// Member selects part of an archive and says where it goes in the
// installed tree. From is an archive path: a file ("package/claude"), or a
// directory prefix ending in "/" ("package/vendor/x86_64-unknown-linux-musl/")
// whose whole subtree is taken. To is the destination: a file name for a
// file member, a directory prefix ending in "/" (or "" for the tree's top)
// for a directory member. Everything else in the archive is skipped.
type Member struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Source is where one platform's build of a CLI comes from, and which parts
// of it are kept.
//
// An npm source names a package (usually the per-platform optional package
// that carries the native binary); its tarball URL is built from the npm
// registry in [Options.Registry]. An archive source names its URL directly.
// Either way Integrity, the SHA-512 of the downloaded bytes in SRI form
// ("sha512-<base64>"), is the pin: it is checked before the archive is
// opened, and no metadata is trusted instead of it.
type Source struct {
	// Package is the npm package name ("@anthropic-ai/claude-code-linux-x64").
	// Empty: an archive source (URL must be set).
	Package string `json:"package,omitempty"`
	// VersionSuffix is appended to the row's version to form the npm
	// version of Package (Codex publishes its platform builds as versions
	// of @openai/codex itself: "0.169.0-linux-x64").
	VersionSuffix string `json:"version_suffix,omitempty"`
	// URL is the download URL of an archive source.
	URL string `json:"url,omitempty"`
	// Integrity is the pinned digest, "sha512-<base64>".
	Integrity string `json:"integrity"`
	// Members and Bin override the row's for this platform (Codex's vendor
	// directory is named after the target triple).
	Members []Member `json:"members,omitempty"`
	Bin     string   `json:"bin,omitempty"`
}

// NPMVersion is the npm version of the package for row version v.
func (s Source) NPMVersion(v string) string { return v + s.VersionSuffix }

// Row is one CLI in the [Catalog].
type Row struct {
	// Name is the catalog key, the adapter's name ("claude", "codex", "agy").
	Name string `json:"name"`
	// Version is the pinned version.
	Version string `json:"version"`
	// Bin is the executable's path inside the installed tree, slash
	// separated ("claude", "bin/codex"). Its base name is the command name
	// on the sandbox PATH.
	Bin string `json:"bin"`
	// Members select what is extracted; see [Member].
	Members []Member `json:"members"`
	// VersionLine is the line `<bin> --version` prints for the pinned
	// version, with %s standing for the version ("%s (Claude Code)"). Empty:
	// any output line holding the version as a whole word is accepted.
	VersionLine string `json:"version_line,omitempty"`
	// Sources holds one download per platform.
	Sources map[Platform]Source `json:"sources"`
	// PinHelp is appended to the error when the row has no source for the
	// platform, telling the user how to provide a pin.
	PinHelp string `json:"pin_help,omitempty"`
	// Launcher is the npm package a person installs the CLI with by hand
	// (`npm install <Launcher>@<Version>`), which pulls in the platform
	// package of the host; see [Row.NPMLauncher]. Empty: not on npm.
	Launcher string `json:"launcher,omitempty"`
}

// NPMLauncher says how `npm install` installs the pinned CLI by hand for
// platform p (scripts/install-clis.sh does, for the real-CLI tests): spec
// is the package to install ("@openai/codex@0.169.0") and bin the
// executable's path under node_modules: the native executable of the
// platform package when the launcher depends on one that holds a single
// file ("@anthropic-ai/claude-code-linux-x64/claude"), else the launcher's
// own command (".bin/codex"). ok is false when the row has no launcher or
// no npm source for p. Unlike a bootstrapped CLI, an npm install is not
// checked against the row's SHA-512 pins.
func (r Row) NPMLauncher(p Platform) (spec, bin string, ok bool) {
	s, has := r.Sources[p]
	if r.Launcher == "" || !has || s.Package == "" {
		return "", "", false
	}
	spec = r.Launcher + "@" + r.Version
	members, _ := r.Layout(p)
	if s.Package != r.Launcher && len(members) == 1 && !strings.HasSuffix(members[0].From, "/") {
		if file, ok := strings.CutPrefix(members[0].From, "package/"); ok {
			return spec, s.Package + "/" + file, true
		}
	}
	return spec, ".bin/" + r.Command(), true
}

// WantVersion is the line `<bin> --version` prints for the pinned version:
// the row's VersionLine with the version filled in, else the version.
func (r Row) WantVersion() string {
	if r.VersionLine == "" {
		return r.Version
	}
	return fmt.Sprintf(r.VersionLine, r.Version)
}

// Layout returns the members and executable path for platform p.
func (r Row) Layout(p Platform) ([]Member, string) {
	s := r.Sources[p]
	members, bin := r.Members, r.Bin
	if len(s.Members) > 0 {
		members = s.Members
	}
	if s.Bin != "" {
		bin = s.Bin
	}
	return members, bin
}

// Command is the name the executable is installed and called under.
func (r Row) Command() string { return path.Base(r.Bin) }

// clone returns a deep copy of r, so catalogs never share mutable state.
func (r Row) clone() Row {
	r.Members = slices.Clone(r.Members)
	r.Sources = maps.Clone(r.Sources)
	for p, s := range r.Sources {
		s.Members = slices.Clone(s.Members)
		r.Sources[p] = s
	}
	return r
}

var (
	validName    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	validVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
	validPackage = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
)

// Validate checks that r is usable: its name and version are safe path
// components, its members and executable path are clean relative paths, and
// every source has a parseable SHA-512 pin. A row without sources is valid
// (it cannot be installed until a pin is added).
func (r Row) Validate() error {
	if !validName.MatchString(r.Name) {
		return outposterr.New(outposterr.Configuration, "catalog row name %q: want lower-case letters, digits, '.', '_' or '-'", r.Name)
	}
	if len(r.Sources) > 0 && !validVersion.MatchString(r.Version) {
		return outposterr.New(outposterr.Configuration, "catalog row %s: invalid version %q", r.Name, r.Version)
	}
	if r.Launcher != "" && !validPackage.MatchString(r.Launcher) {
		return outposterr.New(outposterr.Configuration, "catalog row %s: invalid npm launcher package %q", r.Name, r.Launcher)
	}
	if r.VersionLine != "" && strings.Count(r.VersionLine, "%s") != 1 {
		return outposterr.New(outposterr.Configuration, "catalog row %s: version line %q must hold exactly one %%s", r.Name, r.VersionLine)
	}
	for p, s := range r.Sources {
		if !validName.MatchString(string(p)) {
			return outposterr.New(outposterr.Configuration, "catalog row %s: invalid platform %q", r.Name, p)
		}
		if (s.Package == "") == (s.URL == "") {
			return outposterr.New(outposterr.Configuration, "catalog row %s (%s): set exactly one of package and URL", r.Name, p)
		}
		if s.Package != "" && !validPackage.MatchString(s.Package) {
			return outposterr.New(outposterr.Configuration, "catalog row %s (%s): invalid npm package %q", r.Name, p, s.Package)
		}
		if s.Package != "" && !validVersion.MatchString(s.NPMVersion(r.Version)) {
			return outposterr.New(outposterr.Configuration, "catalog row %s (%s): invalid npm version %q", r.Name, p, s.NPMVersion(r.Version))
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return outposterr.New(outposterr.Configuration, "catalog row %s (%s): URL %q is not http(s)", r.Name, p, s.URL)
		}
		if _, err := ParseIntegrity(s.Integrity); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "catalog row %s (%s)", r.Name, p)
		}
		members, bin := r.Layout(p)
		if err := checkLayout(members, bin); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "catalog row %s (%s)", r.Name, p)
		}
	}
	return nil
}

// checkLayout validates members and the executable path.
func checkLayout(members []Member, bin string) error {
	if len(members) == 0 {
		return fmt.Errorf("no members selected")
	}
	if err := relPath(bin, false); err != nil {
		return fmt.Errorf("bin: %w", err)
	}
	for _, m := range members {
		dir := strings.HasSuffix(m.From, "/")
		if err := relPath(m.From, dir); err != nil {
			return fmt.Errorf("member from: %w", err)
		}
		switch {
		case dir && m.To == "":
		case dir && strings.HasSuffix(m.To, "/"):
			if err := relPath(m.To, true); err != nil {
				return fmt.Errorf("member to: %w", err)
			}
		case dir:
			return fmt.Errorf("member %q is a directory: its destination %q must end in / or be empty", m.From, m.To)
		default:
			if err := relPath(m.To, false); err != nil {
				return fmt.Errorf("member to: %w", err)
			}
		}
	}
	return nil
}

// relPath accepts clean, relative, slash-separated paths without "..",
// ending in "/" exactly when dir is set.
func relPath(p string, dir bool) error {
	q := p
	if dir {
		if !strings.HasSuffix(q, "/") {
			return fmt.Errorf("%q must end in /", p)
		}
		q = strings.TrimSuffix(q, "/")
	}
	if q == "" || path.IsAbs(q) || path.Clean(q) != q || q == "." || strings.ContainsAny(q, "\\\x00") {
		return fmt.Errorf("%q is not a clean relative path", p)
	}
	for part := range strings.SplitSeq(q, "/") {
		if part == ".." {
			return fmt.Errorf("%q has a .. component", p)
		}
	}
	return nil
}

// Catalog is the set of pinned CLIs. It is a value: [Catalog.With] and
// [Catalog.Override] return a modified copy and leave the receiver alone,
// so a program can start from [DefaultCatalog] and adjust it safely.
type Catalog struct {
	rows map[string]Row
}

// NewCatalog returns a catalog of exactly rows, each validated (the outpost
// command builds its catalog from the agent registry's rows). A row named
// twice is an error.
func NewCatalog(rows ...Row) (Catalog, error) {
	c := Catalog{rows: map[string]Row{}}
	for _, r := range rows {
		if _, dup := c.rows[r.Name]; dup {
			return Catalog{}, outposterr.New(outposterr.Configuration, "catalog row %s is given twice", r.Name)
		}
		if err := r.Validate(); err != nil {
			return Catalog{}, err
		}
		c.rows[r.Name] = r.clone()
	}
	return c, nil
}

// Rows returns the rows sorted by name.
func (c Catalog) Rows() []Row {
	out := make([]Row, 0, len(c.rows))
	for _, name := range slices.Sorted(maps.Keys(c.rows)) {
		out = append(out, c.rows[name].clone())
	}
	return out
}

// Names returns the row names, sorted.
func (c Catalog) Names() []string { return slices.Sorted(maps.Keys(c.rows)) }

// Row returns the row called name.
func (c Catalog) Row(name string) (Row, bool) {
	r, ok := c.rows[name]
	if !ok {
		return Row{}, false
	}
	return r.clone(), true
}

// With returns a copy of c in which row r is added, or replaces the row of
// the same name. The row is validated first.
func (c Catalog) With(r Row) (Catalog, error) {
	if err := r.Validate(); err != nil {
		return c, err
	}
	out := Catalog{rows: maps.Clone(c.rows)}
	if out.rows == nil {
		out.rows = map[string]Row{}
	}
	out.rows[r.Name] = r.clone()
	return out, nil
}

// Pin overrides the pin of one platform of a row.
type Pin struct {
	// Platform whose source is pinned. Empty: [HostPlatform].
	Platform Platform
	// Version is the new version. Empty: keep the row's version. When it
	// changes, the row's other platforms are dropped, because their digests
	// pin the old version.
	Version string
	// Integrity is the SHA-512 of the new download: SRI ("sha512-<base64>")
	// or 128 hexadecimal digits. Required.
	Integrity string
	// URL replaces the download URL. Required for archive rows that have no
	// source for the platform yet (Antigravity); for an npm row it turns the
	// source into an archive download of that URL (a private mirror).
	URL string
}

// Override returns a copy of c in which the named row's source for
// pin.Platform is pinned to pin. The row keeps its members, executable path
// and version line.
func (c Catalog) Override(name string, pin Pin) (Catalog, error) {
	r, ok := c.Row(name)
	if !ok {
		return c, outposterr.New(outposterr.Configuration, "override: no catalog row %q (known: %s)", name, strings.Join(c.Names(), ", "))
	}
	p := pin.Platform
	if p == "" {
		p = HostPlatform()
	}
	sri, err := ParseIntegrity(pin.Integrity)
	if err != nil {
		return c, outposterr.Wrap(outposterr.Configuration, err, "override %s", name)
	}
	src, had := r.Sources[p]
	if !had && pin.URL == "" {
		return c, outposterr.New(outposterr.Configuration, "override %s: no source for %s to re-pin; give its URL", name, p)
	}
	if pin.Version != "" && pin.Version != r.Version {
		r.Version = pin.Version
		r.Sources = map[Platform]Source{}
	}
	if r.Sources == nil {
		r.Sources = map[Platform]Source{}
	}
	if pin.URL != "" {
		src.URL, src.Package, src.VersionSuffix = pin.URL, "", ""
	}
	src.Integrity = sri.String()
	r.Sources[p] = src
	return c.With(r)
}

// codexLinuxX64 and codexLinuxARM64 are Codex's Linux packages, glibc and
// musl alike.
var (
	codexLinuxX64 = Source{
		Package:       "@openai/codex",
		VersionSuffix: "-linux-x64",
		Integrity:     "sha512-o05NyAOCDygSPRo1yinzxvkRSdmsZyBD9E7mbpmjRanSfM8lypqWtQgEo4XfNkwhuCR2aFu8mlGOsQGFXVbVww==",
		Members:       []Member{{From: "package/vendor/x86_64-unknown-linux-musl/", To: ""}},
	}
	codexLinuxARM64 = Source{
		Package:       "@openai/codex",
		VersionSuffix: "-linux-arm64",
		Integrity:     "sha512-NZ/DaQUpcQmxmqee7Z9uC1rzw3GhSbooawcaTe1LN5Yk+WlinUKGdTXJgClRT/9ogQEEM9TWxYzvxPfj5G/xFg==",
		Members:       []Member{{From: "package/vendor/aarch64-unknown-linux-musl/", To: ""}},
	}
)

// The default catalog. Integrity values were read once from the registry's
// version documents (dist.integrity) when each pin was added and checked
// against the SHA-512 of the downloaded tarballs; from then on the catalog is
// the trust anchor and no registry metadata is consulted.
//
// Tarball contents (linux-x64):
//   - claude: package/claude (373 MB native executable), package.json,
//     LICENSE.md, README.md.
//   - codex: package/vendor/x86_64-unknown-linux-musl/{bin/codex,
//     bin/codex-code-mode-host, codex-path/rg, codex-resources/bwrap,
//     codex-resources/voice/…, codex-package.json}, package.json, README.md.
//     The whole vendor/<triple>/ tree is kept so codex finds its helpers
//     next to bin/.
//   - copilot: package/copilot (197 MB Node single executable),
//     package.json, LICENSE.md, README.md.
var defaultRows = []Row{
	{
		Name:        "claude",
		Version:     "2.1.328",
		Bin:         "claude",
		Members:     []Member{{From: "package/claude", To: "claude"}},
		VersionLine: "%s (Claude Code)",
		Launcher:    "@anthropic-ai/claude-code",
		Sources: map[Platform]Source{
			LinuxX64: {
				Package:   "@anthropic-ai/claude-code-linux-x64",
				Integrity: "sha512-KuzL+dBHgDCFTHJxwW+xuBJdVKfBsesGx2BBcTOG9sYDGoAD7b1hUV8rsTS4xjoJsB2SmeGraGjBiFuhrYuC9w==",
			},
			LinuxARM64: {
				Package:   "@anthropic-ai/claude-code-linux-arm64",
				Integrity: "sha512-zeWsClzx/rli8q6RsngKisu5BnuZ41J7Htp0qgsdZomaJCINiksf+mewQ/gyaylKajBZCoE9Z8R+OkLMjIkJig==",
			},
			LinuxX64Musl: {
				Package:   "@anthropic-ai/claude-code-linux-x64-musl",
				Integrity: "sha512-JiYOp70eNGo+NQGwfPOyzupUf4rVjXd2cXpyF1elbp97mR22tagM7qlCQ/8jGrKSce82/ZKkyXQo39IsQjnNLQ==",
			},
			LinuxARM64Musl: {
				Package:   "@anthropic-ai/claude-code-linux-arm64-musl",
				Integrity: "sha512-7WgJJKqF3+ZHug9afhVfiEouUME1Y4dApnwqXDK0N06ipIyTPmE7Mqi53FfmUZI7In651SI4ZN7A14xGoe3M2w==",
			},
		},
	},
	{
		Name:        "codex",
		Version:     "0.169.0",
		Bin:         "bin/codex",
		VersionLine: "codex-cli %s",
		Launcher:    "@openai/codex",
		Sources: map[Platform]Source{
			LinuxX64:   codexLinuxX64,
			LinuxARM64: codexLinuxARM64,
			// Codex's Linux builds are static musl binaries: the same
			// packages serve musl systems.
			LinuxX64Musl:   codexLinuxX64,
			LinuxARM64Musl: codexLinuxARM64,
		},
	},
	{
		Name:        "copilot",
		Version:     "1.0.102",
		Bin:         "copilot",
		Members:     []Member{{From: "package/copilot", To: "copilot"}},
		VersionLine: "GitHub Copilot CLI %s.",
		Launcher:    "@github/copilot",
		Sources: map[Platform]Source{
			LinuxX64: {
				Package:   "@github/copilot-linux-x64",
				Integrity: "sha512-eGHPbsP0p2QgfVZCjtbGBFZPBOJQ0DN7xIbBRAo7oG8b1zfLirQIdfI4h8Iy68Dv2cKJGJZg2/EO7W7KpIMJOw==",
			},
			LinuxARM64: {
				Package:   "@github/copilot-linux-arm64",
				Integrity: "sha512-5rO0B2/AduCekrE+aUzipySKZxZY2b/tVRZ8Suy8ymPFNC0Q7HQiQ8DZhxj+3RhHR8rU2Z8KOJVAbtMlROX6+A==",
			},
		},
	},
	{
		// Antigravity is not on npm: its builds are per-platform archives
		// (…/antigravity-cli/<version>-<build>/<platform-dir>/cli_<os>_<arch>.tar.gz)
		// whose member "antigravity" is installed as "agy". No archive URL and
		// digest are recorded here; the user pins one.
		Name:    "agy",
		Bin:     "agy",
		Members: []Member{{From: "antigravity", To: "agy"}},
		PinHelp: "Antigravity is not on npm and has no built-in pin: pin its archive for this platform " +
			"(version, https URL of cli_<os>_<arch>.tar.gz, and its sha512 digest) with Catalog.Override " +
			"or the outpost bootstrap pin setting",
	},
}

// Pinned returns the version the default catalog pins for the CLI name
// ("" when it pins none): the one place a built-in CLI's version is
// written, which its adapter reports as the release it is tested against.
func Pinned(name string) string {
	for _, r := range defaultRows {
		if r.Name == name {
			return r.Version
		}
	}
	return ""
}

// DefaultCatalog returns the built-in pins: Claude Code 2.1.328, Codex
// 0.169.0 and Copilot 1.0.102 from their npm platform packages (linux-x64
// and linux-arm64; Claude Code and Codex also for musl systems, Copilot
// publishes no musl build), and an Antigravity row without a pin.
func DefaultCatalog() Catalog {
	c := Catalog{rows: map[string]Row{}}
	for _, r := range defaultRows {
		c.rows[r.Name] = r.clone()
	}
	return c
}
