package grading

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// PatchPaths returns the paths a git-style unified diff touches, old and
// new names alike (a rename or copy names both), in order of appearance
// and without repeats, read from its "---"/"+++" lines, its "rename
// from/to" and "copy from/to" lines, and the "diff --git a/X b/X" line of
// a change with neither (a binary patch, a mode change). It fails when the
// diff names no path, or a path that is absolute, leaves the tree (".."),
// or lies in .git.
func PatchPaths(patch string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string, strip bool) error {
		p, err := unquote(p)
		if err != nil {
			return err
		}
		if strip {
			if p == "/dev/null" {
				return nil
			}
			pre, rest, ok := strings.Cut(p, "/")
			if !ok || pre == "" {
				return fmt.Errorf("path %q has no a/ or b/ prefix", p)
			}
			p = rest
		}
		if p == "" || strings.HasPrefix(p, "/") {
			return fmt.Errorf("path %q is not relative", p)
		}
		clean := path.Clean(p)
		for _, part := range strings.Split(clean, "/") {
			if part == ".." || strings.EqualFold(part, ".git") {
				return fmt.Errorf("path %q leaves the tree or lies in .git", p)
			}
		}
		if !seen[clean] {
			seen[clean] = true
			out = append(out, clean)
		}
		return nil
	}
	// header is the "diff --git" line of the file being read, used when
	// the file has no ---/+++ or rename lines.
	header, named := "", false
	flush := func() error {
		if header == "" || named {
			return nil
		}
		rest := strings.TrimPrefix(header, "diff --git ")
		if strings.HasPrefix(rest, `"`) {
			return fmt.Errorf("cannot read the paths of %q", header)
		}
		// "a/X b/X": the two halves name the same path.
		if n := len(rest); n%2 == 1 && rest[n/2] == ' ' && rest[2:n/2] == rest[n/2+3:] {
			return add(rest[:n/2], true)
		}
		return fmt.Errorf("cannot read the paths of %q", header)
	}
	// oldLeft and newLeft count the lines left in the hunk being read:
	// a removed line "-- x" is not a "---" header.
	oldLeft, newLeft := 0, 0
	for _, line := range strings.Split(patch, "\n") {
		if oldLeft > 0 || newLeft > 0 {
			switch {
			case strings.HasPrefix(line, "-"):
				oldLeft--
			case strings.HasPrefix(line, "+"):
				newLeft--
			case strings.HasPrefix(line, "\\"): // "\ No newline at end of file"
			default:
				oldLeft--
				newLeft--
			}
			continue
		}
		line = strings.TrimSuffix(line, "\r")
		var err error
		switch {
		case strings.HasPrefix(line, "@@ "):
			oldLeft, newLeft = hunkLengths(line)
		case strings.HasPrefix(line, "diff --git "):
			if err = flush(); err == nil {
				header, named = line, false
			}
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
			named = true
			p, _, _ := strings.Cut(line[4:], "\t") // a timestamp may follow a tab
			err = add(p, true)
		case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
			named = true
			_, p, _ := strings.Cut(line, " from ")
			err = add(p, false)
		case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
			named = true
			_, p, _ := strings.Cut(line, " to ")
			err = add(p, false)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("the patch names no file: give a unified diff (git diff)")
	}
	return out, nil
}

// unquote undoes git's C-style quoting of a path with special characters.
func unquote(p string) (string, error) {
	if !strings.HasPrefix(p, `"`) {
		return p, nil
	}
	s, err := strconv.Unquote(p)
	if err != nil {
		return "", fmt.Errorf("path %s: %w", p, err)
	}
	return s, nil
}

// hunkLengths reads the line counts of a hunk header "@@ -l[,s] +l[,s] @@"
// (a count left out is 1).
func hunkLengths(h string) (int, int) {
	f := strings.Fields(h)
	if len(f) < 3 {
		return 0, 0
	}
	count := func(r string) int {
		_, s, ok := strings.Cut(r, ",")
		if !ok {
			return 1
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return count(f[1]), count(f[2])
}
