package batch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestEnvironmentSpec: an environment resolves to a context and a
// Dockerfile inside it; a job gives an image or an environment, paths
// absolute, the Dockerfile inside the context.
func TestEnvironmentSpec(t *testing.T) {
	for _, c := range []struct {
		e             EnvironmentSpec
		ctx, file     string
		wantErr       string
		compileErrMsg string
	}{
		{e: EnvironmentSpec{Context: "/t/env"}, ctx: "/t/env", file: "Dockerfile"},
		{e: EnvironmentSpec{Dockerfile: "/t/env/Dockerfile.py"}, ctx: "/t/env", file: "Dockerfile.py"},
		{e: EnvironmentSpec{Dockerfile: "/t/env/sub/D", Context: "/t"}, ctx: "/t", file: "env/sub/D"},
		{e: EnvironmentSpec{Dockerfile: "/elsewhere/D", Context: "/t"}, wantErr: "outside the build context"},
		{e: EnvironmentSpec{}, wantErr: "give a dockerfile, a context directory or both"},
	} {
		ctx, file, err := c.e.Paths()
		if c.wantErr != "" {
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantErr)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, c.ctx, ctx)
		assert.Equal(t, c.file, file)
	}

	job := func(img string, e *EnvironmentSpec) *Job {
		return &Job{ID: "j", Agent: "a", Prompt: "p", Image: img, Environment: e}
	}
	require.NoError(t, job("", &EnvironmentSpec{Context: "/t/env"}).Compile())
	for _, c := range []struct {
		j    *Job
		want string
	}{
		{job("img", &EnvironmentSpec{Context: "/t/env"}), "give an image or an environment to build one, not both"},
		{job("", &EnvironmentSpec{Context: "env"}), `"env" is not absolute`},
		{job("", &EnvironmentSpec{Context: "/t", Dockerfile: "/u/D"}), "outside the build context"},
	} {
		err := c.j.Compile()
		require.Error(t, err)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
		assert.Contains(t, err.Error(), c.want)
	}
}
