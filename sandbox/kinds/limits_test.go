package kinds_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kinds"
)

// A memory or pids limit that is NaN or beyond an int64 is a
// configuration error on every isolated kind, before any engine is asked:
// Limit.Int made it a negative number, which the providers read as no
// limit at all (the host kind refuses every limit already).
func TestUnusableLimitsAreRefused(t *testing.T) {
	getenv := func(k string) string {
		switch k {
		case "DOCKER_HOST", "CONTAINER_HOST":
			return "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
		}
		return ""
	}
	settings := map[string]string{"kubeconfig": filepath.Join(t.TempDir(), "kubeconfig")}
	for _, name := range []string{"docker", "podman", "kubernetes", "host"} {
		k, err := kinds.Builtin().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []sandbox.Common{
			{Memory: sandbox.Limit(math.NaN())},
			{Memory: sandbox.Limit(1e19)},
			{Pids: sandbox.Limit(math.Inf(1))},
		} {
			e, err := k.Open(context.Background(), sandbox.Config{Kind: name, Common: c, Settings: settings, Getenv: getenv})
			if err == nil {
				e.Close()
				t.Errorf("%s: limits %+v accepted", name, c)
				continue
			}
			if !outposterr.Is(err, outposterr.Configuration) {
				t.Errorf("%s: limits %+v: not a configuration error: %v", name, c, err)
			}
		}
	}
}
