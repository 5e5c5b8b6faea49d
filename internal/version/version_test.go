package version

import (
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDeclaredIsASemverTag(t *testing.T) {
	assert.Regexp(t, regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`), Declared)
}

func TestVersionPrefersTheStamp(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "", ""
	assert.Equal(t, Declared, Version())
	version, commit = "v9.9.9", "abc123"
	assert.Equal(t, "v9.9.9", Version())
	assert.Equal(t, "abc123", Commit())
}

func TestCommitOf(t *testing.T) {
	assert.Equal(t, "unknown", commitOf(nil))
	assert.Equal(t, "unknown", commitOf(&debug.BuildInfo{}))
	rev := "0123456789abcdef0123456789abcdef01234567"
	assert.Equal(t, rev, commitOf(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}))
	assert.Equal(t, rev+"-dirty", commitOf(&debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}))
}
