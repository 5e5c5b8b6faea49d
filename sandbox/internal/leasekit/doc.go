// Package leasekit holds what the sandbox providers share, so the kinds
// behave alike. The container providers (sandbox/docker,
// sandbox/kubernetes) share the process state
// machine's common part ([Proc]: output pipes, live stdin, exit status,
// group signals through the kind's signal script, Close), Exec's command
// check around the kind's start ([Exec]), the exit-code
// decoding ([StatusOf]), a lease's release bookkeeping ([ReleaseState]),
// CopyIn and CopyOut through tar in the lease (the archive checked on its
// way in), a bounded in-memory pipe for process output, the reader of the
// markers a wrapper writes into a command's output ([Markers]), a tail buffer for
// error messages, and Linux signal names. Every kind, the host's too,
// tracks its leases for ReleaseAll with [Tracker] and [ReleaseAllWithin]
// and checks a lease's workspace with [WorkspaceDir]; they archive a tree of this machine (a
// build context, a workspace, the host provider's CopyOut) with
// internal/safetar, which also decides which archive names and links are
// safe to extract. The reapers' owner decisions are internal/procowner
// (Policy).
package leasekit
