// Package version is the outpost version, declared once for every checkout
// and every go build, and the commit the binary was built from.
package version

import (
	"runtime/debug"
)

// Declared is the version of this source tree. A release bumps it, tags the
// commit with the same name and runs scripts/release.sh with that name,
// which refuses any other.
const Declared = "v0.9.0"

// Set by the release build (-ldflags "-X …/internal/version.version=… -X
// …/internal/version.commit=…"); empty in other builds.
var (
	version string
	commit  string
)

// Version is the outpost version: the release build's stamp, else
// [Declared].
func Version() string {
	if version != "" {
		return version
	}
	return Declared
}

// Commit is the commit the binary was built from: the release build's stamp,
// else the VCS revision go build recorded (with -dirty for a modified
// tree), else "unknown" (go build -buildvcs=false, go install of a module).
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, _ := debug.ReadBuildInfo()
	return commitOf(bi)
}

// commitOf reads the revision from build information (nil: none).
func commitOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}
