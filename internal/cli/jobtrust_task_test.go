package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJobTrustTaskFileLinks: a task directory from elsewhere cannot make a
// host file its prompt (or its task.json) with a link out of the tasks
// directory: the file's content would go to the agent and its model.
func TestJobTrustTaskFileLinks(t *testing.T) {
	for _, name := range []string{taskInstruction, taskConfig} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			secret := filepath.Join(root, "home", "secret")
			require.NoError(t, os.MkdirAll(filepath.Dir(secret), 0o755))
			content := map[string]string{taskInstruction: "AWS_SECRET=hunter2", taskConfig: "{}"}[name]
			require.NoError(t, os.WriteFile(secret, []byte(content), 0o600))
			task := filepath.Join(root, "tasks", "t1")
			require.NoError(t, os.MkdirAll(task, 0o755))
			for _, f := range []string{taskInstruction, taskConfig} {
				if f == name {
					require.NoError(t, os.Symlink(secret, filepath.Join(task, f)))
				} else {
					require.NoError(t, os.WriteFile(filepath.Join(task, f), []byte(map[string]string{taskInstruction: "fix it", taskConfig: `{"agent":"claude"}`}[f]), 0o644))
				}
			}
			o := &BatchOptions{}
			o.Run.Turn.Agent = "claude"
			jobs, err := readTasks(filepath.Join(root, "tasks"), o)
			require.Error(t, err, "a link out of the tasks directory is refused: %+v", jobs)
			assert.Contains(t, err.Error(), name)
			assert.Contains(t, err.Error(), "is outside")
			assert.NotContains(t, err.Error(), "hunter2")

			// Allowed explicitly, it reads.
			o.AllowPaths = []string{filepath.Join(root, "home")}
			_, err = readTasks(filepath.Join(root, "tasks"), o)
			require.NoError(t, err)
		})
	}
}
