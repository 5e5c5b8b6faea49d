package leasekit

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPIDNamespace: this process's pid namespace is a number on Linux; an
// owner that recorded none, or this one, is not in another namespace, and
// one that recorded a different number is.
func TestPIDNamespace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pid namespaces are Linux's")
	}
	ns := PIDNamespace()
	assert.NotEmpty(t, ns)
	assert.Empty(t, strings.Trim(ns, "0123456789"), "%q is an inode number", ns)
	assert.False(t, OtherPIDNamespace(""), "an owner that recorded no namespace is judged as before")
	assert.False(t, OtherPIDNamespace(ns))
	assert.True(t, OtherPIDNamespace(ns+"0"))
}
