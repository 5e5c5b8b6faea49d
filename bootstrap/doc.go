// Package bootstrap puts pinned agent CLIs into sandboxes: a catalog of
// pins, verified downloads, a shared host cache, hostile-input-safe
// extraction, and installation into a lease by bind mount or by copy.
//
// A turn must never depend on whatever binary happens to be lying around,
// so a CLI is only ever run from bytes whose SHA-512 equals the catalog's
// pin, or from a binary whose `--version` reports the pinned version.
//
// # Catalog
//
// [DefaultCatalog] pins Claude Code 2.1.328, Codex 0.169.0 and Copilot
// 1.0.102. Each row names the npm per-platform package that carries the
// native binary (the main packages are launchers), and records its tarball's
// dist.integrity for linux-x64 and linux-arm64, and for their musl variants
// where the vendor publishes one (Claude Code; Codex's static musl build
// serves both; Copilot has none). Those values were read once
// from the registry and checked against the downloaded tarballs when the pin
// was added; at run time the catalog is the trust anchor and registry
// metadata is not needed. Antigravity (agy) is not on npm: its row selects
// the archive member "antigravity" (installed as "agy") but carries no
// download, so [Bootstrapper.Ensure] refuses it with a bootstrap error
// until the user pins one with [Catalog.Override] (version, URL, SHA-512).
// [Catalog.Override] also re-pins any CLI, and [Catalog.With] adds a row.
// Catalogs are values; both return modified copies.
//
// # Downloads
//
// npm tarballs are fetched from <registry>/<@scope>/<name>/-/<name>-<version>.tgz
// (the path npm registries and their mirrors serve; if it is missing, the
// version document's dist.tarball is used, after checking that the
// document's dist.integrity agrees with the pin). No registry host is
// built in: [NPMConfig.Resolve] reads it, in order, from an explicit Outpost
// setting, NPM_CONFIG_REGISTRY, the project and user .npmrc (including
// @scope:registry lines) and `npm config get registry`, all passed in as
// values and functions. An [Options.Mirror] directory of archives, named
// by URL base name or as `npm pack` names them, stands in for the network;
// [Options.Offline] forbids the network entirely.
//
// A download streams into a temporary file inside the cache while its
// SHA-512 is computed; it is bounded by [Limits.MaxDownload], a stall
// timeout, an overall timeout and the caller's context, and reported to
// [Options.Progress]. The digest is compared with the pin before the archive
// is opened: a mismatch is an [outposterr.Bootstrap] error wrapping
// [ErrIntegrity] that names both digests in SRI form, and the temporary file
// is removed. Registry authentication (tokens in .npmrc) is not supported.
//
// # Extraction
//
// Archives are gzip, zstd (github.com/klauspost/compress) or plain tar,
// detected by magic bytes. Only the members the row names are extracted
// (a file, or a directory prefix), but every entry is checked: absolute
// names, ".." components, hard links, devices and FIFOs, symbolic links
// that are absolute or contain "..", duplicates, and entries or archives
// over [Limits] stop the extraction with [ErrUnsafeArchive]. All writes go
// through an [os.Root], so the tree cannot be left even through a link.
// Files become 0755 or 0644; owners and special bits are dropped.
//
// # Cache
//
// The cache root is passed in ([Options.CacheDir]; the CLI uses
// os.UserCacheDir()/outpost). An entry lives in
// cli/<name>/<version>/<platform>/ as manifest.json (name, version,
// platform, source, integrity, size, executable, files with type, mode and
// size, install time) and tree/. It is built in tmp/ and published with one
// atomic rename while holding locks/<name>@<version>@<platform>.lock
// (flock(2); a per-entry semaphore inside the process), so concurrent
// goroutines and processes download once and never see half a tree.
// Lock files stay behind; nothing else does when an install fails, and
// temporaries a crashed process left in tmp/ are swept after a day. A
// present entry is re-verified cheaply (manifest against the pin, every
// file's type, size and mode) and trusted; a damaged one is rebuilt.
// Extracted files are not fsynced: a tree cut short by a crash fails the
// size check and is rebuilt.
//
// # Sandboxes
//
// Entries are built for [Options.Platform], by default the host's (leases
// share its architecture, and the base image is glibc). When a sandbox
// image may use musl, [DetectPlatform] asks the sandbox and
// [Bootstrapper.EnsureFor] installs for that platform.
//
// [Entry.Mount] returns a read-only bind mount of the tree at
// /opt/outpost/cli/<name>/<version> for sandbox.Spec.Mounts, so a cold
// container lease copies nothing; put [Entry.SandboxBinDir] on the lease's
// PATH. [Bootstrapper.Install] copies the tree into a lease instead (by
// default under <home>/.outpost/cli/<name>/<version>) with CopyIn, unless a
// binary reporting the pinned version is already there.
// [Bootstrapper.Check] runs `<bin> --version` in the sandbox, bounded by
// [CheckTimeout], and accepts only the pinned version line; a binary that
// reports anything else is replaced by Install, never trusted.
//
// A typical caller:
//
//	reg := bootstrap.NPMConfig{Setting: cfg.Registry, Getenv: os.Getenv, Dir: wd, Home: home,
//		RunNPM: bootstrap.NPMCommand(ctx, "npm")}
//	b, err := bootstrap.New(bootstrap.Options{CacheDir: filepath.Join(cacheDir, "outpost"),
//		Registry: reg.Resolve, Progress: bar.Update})
//	e, err := b.Ensure(ctx, "claude")
//	spec.Mounts = append(spec.Mounts, e.Mount())
//	spec.Env["PATH"] = e.SandboxBinDir() + ":" + basePath
//	sb, err := provider.Acquire(ctx, spec)
//	_, err = b.Check(ctx, sb, "claude", e.SandboxBin())
//
// The package prints nothing and reads no environment variables.
package bootstrap
