package report

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Location is a file and line a job's result names: a changed file of its
// patch (the first hunk's line in the new file), or a failing test's file
// and line in the verifier's output.
type Location struct {
	File string
	// Line is 0 when unknown.
	Line int
	// Test is true for a failing test's location.
	Test bool
}

// maxLocations bounds the locations taken from one patch or one output.
const maxLocations = 5

// PatchLocations lists the files a unified diff changes, each at its first
// hunk's new-file line (deleted files are left out: they have no line to
// point at), in diff order, at most max.
func PatchLocations(diff string, limit int) []Location {
	var out []Location
	cur := -1
	for line := range strings.Lines(diff) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "+++ "):
			cur = -1
			if len(out) >= limit {
				return out
			}
			p := strings.TrimPrefix(line, "+++ ")
			if i := strings.IndexByte(p, '\t'); i >= 0 {
				p = p[:i]
			}
			if p == "/dev/null" {
				continue
			}
			p = strings.TrimPrefix(p, "b/")
			if safeRepoPath(p) {
				out = append(out, Location{File: p})
				cur = len(out) - 1
			}
		case cur >= 0 && out[cur].Line == 0 && strings.HasPrefix(line, "@@ "):
			out[cur].Line = hunkStart(line)
		}
	}
	return out
}

// hunkStart reads "@@ -a,b +c,d @@": c, at least 1.
func hunkStart(line string) int {
	i := strings.Index(line, " +")
	if i < 0 {
		return 0
	}
	s := line[i+2:]
	if j := strings.IndexAny(s, ", "); j >= 0 {
		s = s[:j]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return max(n, 1)
}

// Failing test locations in a verifier's output: pytest's "path.py:LINE:"
// at a line's start (its tracebacks and short summaries), and go test's
// indented "file_test.go:LINE:".
var (
	pytestLoc = regexp.MustCompile(`(?m)^([A-Za-z0-9_./-]+\.py):(\d+): `)
	goTestLoc = regexp.MustCompile(`(?m)^\s+([A-Za-z0-9_./-]+_test\.go):(\d+): `)
)

// TestLocations lists the failing tests' files and lines the verifier's
// output names, first seen first, each file once, at most limit. A go test
// file is printed by base name: a changed file of the patch with that base
// name gives its path.
func TestLocations(output string, changed []Location, limit int) []Location {
	var out []Location
	seen := map[string]bool{}
	add := func(file, line string, goTest bool) {
		if len(out) >= limit || !safeRepoPath(file) {
			return
		}
		if goTest && !strings.Contains(file, "/") {
			for _, c := range changed {
				if strings.HasSuffix(c.File, "/"+file) {
					file = c.File
					break
				}
			}
		}
		n, err := strconv.Atoi(line)
		if err != nil || n < 1 || seen[file] {
			return
		}
		seen[file] = true
		out = append(out, Location{File: file, Line: n, Test: true})
	}
	for _, m := range pytestLoc.FindAllStringSubmatch(output, 50) {
		add(m[1], m[2], false)
	}
	for _, m := range goTestLoc.FindAllStringSubmatch(output, 50) {
		add(m[1], m[2], true)
	}
	return out
}

// safeRepoPath accepts a relative path inside a repository: no absolute
// path, no "..", no control or separator characters a workflow command
// could misread, no C1 control (a terminal's 8-bit CSI and OSC) or
// bidirectional formatting character (which reorders the name shown).
func safeRepoPath(p string) bool {
	if p == "" || len(p) > 500 || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `"`) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "" {
			return false
		}
	}
	for _, r := range p {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return false
		}
	}
	return true
}

// Locations are the places a failed job's annotations point at: its
// failing tests first, then its patch's changed files (the loaded patch's
// hunks, else the record's file list without lines).
func (j *JobRow) Locations() []Location {
	changed := PatchLocations(j.LastPatch(), maxLocations)
	if len(changed) == 0 && j.Patch != nil {
		for _, f := range j.Patch.Files {
			if len(changed) < maxLocations && safeRepoPath(f) {
				changed = append(changed, Location{File: f})
			}
		}
	}
	var tests []Location
	if j.Verify != nil {
		tests = TestLocations(j.Verify.Output, changed, 3)
	}
	return append(tests, changed...)
}
