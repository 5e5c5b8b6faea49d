// Package leasekit holds what the container providers (sandbox/docker,
// sandbox/kubernetes) share, so both kinds behave alike: the process state
// machine's common part ([Proc]: output pipes, live stdin, exit status,
// group signals through the kind's signal script, Close), the exit-code
// decoding ([StatusOf]), CopyIn and CopyOut through tar in the lease (the
// archive checked on its way in), a bounded in-memory pipe for process
// output, a tail buffer for error messages, and Linux signal names. The
// reapers' owner decisions are internal/procowner (Policy).
package leasekit
