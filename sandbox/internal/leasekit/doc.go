// Package leasekit holds the pieces the container providers (sandbox/docker,
// sandbox/kubernetes) share: the archive checks of CopyIn, a bounded
// in-memory pipe for process output, a tail buffer for error messages,
// and Linux signal names. The reapers' owner checks are internal/procowner.
package leasekit
