package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// TestHostRefusesLimitsByFlag: the host sandbox refuses each limit it
// cannot apply with a configuration error naming the kind and exactly the
// flags given; asking for no limit is what it does anyway.
func TestHostRefusesLimitsByFlag(t *testing.T) {
	for _, c := range []struct {
		o    sandbox.Common
		want string
	}{
		{sandbox.Common{CPUs: 1}, "the host sandbox cannot apply --cpus: "},
		{sandbox.Common{Memory: 1 << 30}, "the host sandbox cannot apply --memory: "},
		{sandbox.Common{Pids: 100}, "the host sandbox cannot apply --pids-limit: "},
		{sandbox.Common{CPUs: 1, Memory: 1 << 30, Pids: 100}, "the host sandbox cannot apply --cpus, --memory, --pids-limit: "},
		{sandbox.Common{CPUs: sandbox.NoLimit, Memory: 1 << 30}, "the host sandbox cannot apply --memory: "},
	} {
		_, err := Kind().Open(context.Background(), sandbox.Config{Common: c.o})
		require.Error(t, err, "%+v", c.o)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		assert.ErrorContains(t, err, c.want)
	}
	e, err := Kind().Open(context.Background(), sandbox.Config{
		Common: sandbox.Common{CPUs: sandbox.NoLimit, Memory: sandbox.NoLimit, Pids: sandbox.NoLimit}})
	require.NoError(t, err, "no limit is what the host sandbox does")
	e.Close()
}

// TestHostEnvIsChosen: the host sandbox gives CLIs a few variables from
// Getenv, TZ=UTC, and nothing else of the environment.
func TestHostEnvIsChosen(t *testing.T) {
	env := map[string]string{"PATH": "/bin", "LANG": "C.UTF-8", "SECRET_TOKEN": "s3cret"}
	e, err := Kind().Open(context.Background(), sandbox.Config{Getenv: func(k string) string { return env[k] }})
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, map[string]string{"PATH": "/bin", "LANG": "C.UTF-8", "TZ": "UTC"}, e.(*engine).env)
}
