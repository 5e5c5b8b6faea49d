package kubernetes

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels Outpost puts on every pod and Secret it creates, under the
// outpost.dev/ prefix as Kubernetes recommends for tool labels. They mirror
// the Docker provider's labels, so `outpost gc` reasons the same way.
const (
	// LabelManaged is "true" on every Outpost resource; the reaper lists by it.
	LabelManaged = "outpost.dev/managed"
	// LabelRun identifies the outpost run (process invocation) that created the resource.
	LabelRun = "outpost.dev/run"
	// LabelSession identifies the warm session, when the caller named one.
	LabelSession = "outpost.dev/session"
	// LabelVersion is the Outpost version that created the resource.
	LabelVersion = "outpost.dev/version"
	// LabelLease is the lease id (the pod name is "outpost-" and its first 16 characters).
	LabelLease = "outpost.dev/lease"
	// LabelOwnerPID is the pid of the owning outpost process on LabelOwnerHost.
	LabelOwnerPID = "outpost.dev/owner-pid"
	// LabelOwnerHost is the host name of the owning process (pids are only
	// meaningful on that host).
	LabelOwnerHost = "outpost.dev/owner-host"
	// LabelOwnerStart is the owning process's start time (Linux clock ticks
	// since boot), so a reused pid is not mistaken for the owner.
	LabelOwnerStart = "outpost.dev/owner-start"
	// LabelOwnerPIDNS is the owning process's pid namespace (the inode
	// number of /proc/self/ns/pid): a pid of another pid namespace cannot be
	// checked here even when the host name is this host's.
	LabelOwnerPIDNS = "outpost.dev/owner-pidns"
	// LabelCreated is the creation time in Unix seconds.
	LabelCreated = "outpost.dev/created"
)

// Annotations Outpost puts on its pods.
const (
	// AnnotationHeartbeat is refreshed (RFC 3339, UTC) every
	// Options.HeartbeatInterval while the owner holds the lease; [Provider.Reap] uses
	// it for leases whose owner runs on another host.
	AnnotationHeartbeat = "outpost.dev/heartbeat"
	// AnnotationOwnerHost is the owner's full host name when it does not fit
	// a label value.
	AnnotationOwnerHost = "outpost.dev/owner-host"
)

// labelPrefix namespaces caller label keys that carry no "/" ("session").
const labelPrefix = "outpost.dev/"

// labelKey returns the label key for a caller-supplied key: keys without a
// "/" go under the outpost.dev/ prefix ("dev.outpost.session" keeps its last
// dotted part, as the Docker provider's names do), full keys are kept.
func labelKey(k string) string {
	if strings.Contains(k, "/") {
		return k
	}
	if rest, ok := strings.CutPrefix(k, "dev.outpost."); ok {
		k = rest
	}
	return labelPrefix + k
}

// setLabel stores k=v as a label when both are valid label parts, else as an
// annotation (which takes any value), so a caller's run or session name is
// never refused or mangled.
func setLabel(labels, annotations map[string]string, k, v string) {
	if len(validation.IsQualifiedName(k)) > 0 {
		return
	}
	if len(validation.IsValidLabelValue(v)) == 0 {
		labels[k] = v
		return
	}
	annotations[k] = v
}

// labelValue makes s a valid label value: characters outside [A-Za-z0-9._-]
// become "-", at most 63 characters, alphanumeric at both ends.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "._-")
}
