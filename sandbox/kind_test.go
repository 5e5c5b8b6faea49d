package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestOverrideApply pins the precedence of a turn's or job's own image and
// limits over its lease's spec, and the host sandbox's refusal of them.
func TestOverrideApply(t *testing.T) {
	// The lease's spec: an image and a CPU quota set, memory and pids
	// unset (the runner's Common or the kind's default, decided by the
	// provider).
	lease := Spec{Workspace: "/w", Image: "base", CPUs: 3}
	for _, tc := range []struct {
		name     string
		over     Override
		isolated bool
		want     Spec
		err      string // "": no error
	}{
		{name: "unset keeps the lease's", isolated: true, want: lease},
		{name: "set replaces the lease's", isolated: true,
			over: Override{Image: "job", CPUs: 1.5, MemoryBytes: 1 << 30, Pids: 64},
			want: Spec{Workspace: "/w", Image: "job", CPUs: 1.5, MemoryBytes: 1 << 30, Pids: 64}},
		{name: "field by field", isolated: true, over: Override{MemoryBytes: 1 << 20},
			want: Spec{Workspace: "/w", Image: "base", CPUs: 3, MemoryBytes: 1 << 20}},
		{name: "no limit is not a turn's to ask", isolated: true, over: Override{CPUs: NoLimit.Float()},
			err: "negative resource limit"},
		{name: "negative memory", isolated: true, over: Override{MemoryBytes: NoLimit.Int()}, err: "negative resource limit"},
		{name: "negative pids", isolated: true, over: Override{Pids: -5}, err: "negative resource limit"},
		{name: "host with nothing set", want: lease},
		{name: "host refuses what is set, naming it", over: Override{Image: "job", Pids: 10},
			err: "the host sandbox cannot apply image job, pids: run in an isolated sandbox"},
		{name: "host refuses before a negative is", over: Override{CPUs: 1, MemoryBytes: -1},
			err: "the host sandbox cannot apply cpus, memory:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.over.Apply(lease, "host", tc.isolated)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestLeaseResources: a spec's own limits win, then the provider's; an
// unset provider limit is the default, a negative one none.
func TestLeaseResources(t *testing.T) {
	assert.Equal(t, Resources{CPUs: DefaultCPUs, MemoryBytes: DefaultMemoryBytes, Pids: DefaultPids},
		LeaseResources(Spec{}, 0, 0, 0))
	assert.Equal(t, Resources{CPUs: 1, MemoryBytes: 1 << 30, Pids: 64},
		LeaseResources(Spec{}, 1, 1<<30, 64))
	assert.Equal(t, Resources{}, LeaseResources(Spec{}, -1, -1, -1))
	assert.Equal(t, Resources{CPUs: 0.5, MemoryBytes: 2 << 30, Pids: 32},
		LeaseResources(Spec{CPUs: 0.5, MemoryBytes: 2 << 30, Pids: 32}, -1, 1<<30, 0))
}
