// Package leasekit holds what the container providers (sandbox/docker,
// sandbox/kubernetes) share, so both kinds behave alike: the process state
// machine's common part ([Proc]: output pipes, live stdin, exit status,
// group signals through the kind's signal script, Close), Exec's command
// check around the kind's start ([Exec]), the exit-code
// decoding ([StatusOf]), a lease's release bookkeeping ([ReleaseState]),
// CopyIn and CopyOut through tar in the lease (the archive checked on its
// way in), a bounded in-memory pipe for process output, a tail buffer for
// error messages, and Linux signal names. The kinds check a lease's
// workspace with [WorkspaceDir]; they archive a tree of this machine (a
// build context, a workspace, the host provider's CopyOut) with
// internal/safetar, which also decides which archive names and links are
// safe to extract. The reapers' owner decisions are internal/procowner
// (Policy).
package leasekit
