package leasekit

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/outpost-dev/outpost/internal/procowner"
)

// PIDNamespace is this process's pid namespace: the inode number of
// /proc/self/ns/pid ("4026531836"), "" where it cannot be read. Owner
// labels carry it beside the pid and host name: a process in another pid
// namespace (outpost in a container on the host network, whose host name
// is the host's) has pids this process cannot check.
var PIDNamespace = sync.OnceValue(func() string {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	ino, ok := strings.CutPrefix(l, "pid:[")
	if !ok {
		return ""
	}
	if ino, ok = strings.CutSuffix(ino, "]"); !ok || ino == "" || strings.Trim(ino, "0123456789") != "" {
		return ""
	}
	return ino
})

// OtherPIDNamespace reports whether an owner recorded in pid namespace ns
// ("" for owners that recorded none) is outside this process's, so that its
// pid cannot be checked here.
func OtherPIDNamespace(ns string) bool {
	return ns != "" && ns != PIDNamespace()
}

// Owner is the owner a lease's labels record: its pid (0, not checkable
// here, when the label is not a number or names another pid namespace:
// the owner is then judged by age, as another host's), host and start
// time.
func Owner(pid, host, start, pidns string) procowner.Owner {
	n, _ := strconv.Atoi(pid)
	if OtherPIDNamespace(pidns) {
		n = 0
	}
	return procowner.Owner{PID: n, Host: host, Start: start}
}
