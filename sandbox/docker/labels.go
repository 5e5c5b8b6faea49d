package docker

import "strings"

// Labels Outpost puts on every container, volume and network it creates.
// Reverse-DNS names, as Docker recommends for tool labels.
const (
	// LabelManaged is "true" on every Outpost resource; the reaper lists by it.
	LabelManaged = "dev.outpost.managed"
	// LabelRun identifies the outpost run (process invocation) that created the resource.
	LabelRun = "dev.outpost.run"
	// LabelSession identifies the warm session, when the caller named one.
	LabelSession = "dev.outpost.session"
	// LabelVersion is the Outpost version that created the resource.
	LabelVersion = "dev.outpost.version"
	// LabelLease is the lease id (also the container name suffix).
	LabelLease = "dev.outpost.lease"
	// LabelOwnerPID is the pid of the owning outpost process on LabelOwnerHost.
	LabelOwnerPID = "dev.outpost.owner-pid"
	// LabelOwnerHost is the host name of the owning process (pids are only
	// meaningful on that host).
	LabelOwnerHost = "dev.outpost.owner-host"
	// LabelOwnerStart is the owning process's start time (Linux clock ticks
	// since boot), so a reused pid is not mistaken for the owner.
	LabelOwnerStart = "dev.outpost.owner-start"
	// LabelOwnerPIDNS is the owning process's pid namespace (the inode
	// number of /proc/self/ns/pid): a pid of another pid namespace cannot be
	// checked here even when the host name is this host's.
	LabelOwnerPIDNS = "dev.outpost.owner-pidns"
)

// labelPrefix namespaces caller label keys that carry no dot ("session").
const labelPrefix = "dev.outpost."

// labelKey returns the label name for a caller-supplied key: keys without a
// dot are placed under the dev.outpost. namespace, full names are kept.
func labelKey(k string) string {
	if strings.Contains(k, ".") {
		return k
	}
	return labelPrefix + k
}
