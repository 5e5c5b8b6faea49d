package leasekit

import (
	"context"
	"strconv"
	"strings"
)

// counterScript prints the value of the counter named $1 in the first
// readable cgroup file among $2…, or -1: sh -c counterScript NAME KEY FILE….
// It uses shell builtins only, so it runs even while the lease is at its
// pids limit (the exec itself still needs a free slot).
const counterScript = `k0=$1; shift
for f in "$@"; do
if [ -r "$f" ]; then while read -r k v; do if [ "$k" = "$k0" ]; then echo "$v"; exit 0; fi; done <"$f"; fi
done
echo -1`

// A container's cgroup counters, as seen from inside it: the key, then the
// files that may hold it (cgroup v2's, then v1's).
var (
	// OOMCounter is the memory cgroup's count of OOM kills (v2
	// memory.events, v1 memory.oom_control).
	OOMCounter = []string{"oom_kill", "/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}
	// PidsCounter is the pids cgroup's count of forks refused at a limit
	// (v2 pids.events, v1 pids/pids.events). On cgroup v1 it counts forks
	// refused by any limit above the container (a pod's); v2 counts them
	// only with cgroup2's pids_localevents.
	PidsCounter = []string{"max", "/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"}
)

// ReadCounter reads one cgroup counter of a lease through run, which runs a
// short command in the lease and returns its standard output; -1 when no
// file of the counter is readable.
func ReadCounter(ctx context.Context, run func(ctx context.Context, args []string) ([]byte, error), counter []string) (int64, error) {
	out, err := run(ctx, append([]string{"sh", "-c", counterScript, "outpost-counter"}, counter...))
	if err != nil {
		return -1, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}
