package grading

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPatchPaths(t *testing.T) {
	patch := `diff --git a/tests/test_a.py b/tests/test_a.py
index 1111111..2222222 100644
--- a/tests/test_a.py
+++ b/tests/test_a.py
@@ -1,3 +1,3 @@
 import a
--- a comment line removed
+++ a line added
 x
diff --git a/tests/new_test.go b/tests/new_test.go
new file mode 100644
--- /dev/null
+++ b/tests/new_test.go
@@ -0,0 +1 @@
+package tests
diff --git a/old.txt b/renamed.txt
similarity index 100%
rename from old.txt
rename to renamed.txt
diff --git a/bin.dat b/bin.dat
index 3333333..4444444 100644
GIT binary patch
literal 1
IcmZo*0RR7P

diff --git "a/sp ace\"q.txt" "b/sp ace\"q.txt"
--- "a/sp ace\"q.txt"
+++ "b/sp ace\"q.txt"
@@ -1 +1 @@
-a
+b
diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
`
	got, err := PatchPaths(patch)
	require.NoError(t, err)
	assert.Equal(t, []string{"tests/test_a.py", "tests/new_test.go", "old.txt", "renamed.txt", "bin.dat", `sp ace"q.txt`, "mode.sh"}, got)

	for want, p := range map[string]string{
		"names no file":          "just text\n",
		"leaves the tree":        "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n",
		"lies in .git":           "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n",
		"is not relative":        "diff --git a/x b/y\nrename from /etc/passwd\nrename to y\n",
		"has no a/ or b/ prefix": "--- /etc/passwd\n+++ /etc/passwd\n",
	} {
		_, err := PatchPaths(p)
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}
