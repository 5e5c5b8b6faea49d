// Package kubernetes is the Kubernetes [sandbox.Provider]: every lease is
// one hardened pod, reached through the API server with client-go
// (k8s.io/client-go). It is the only package of Outpost that imports
// client-go, and it never runs kubectl. Construct it with [New]; the
// kubeconfig path, context and namespace come from the caller (the library
// reads no environment variables).
//
// # Leases
//
// [Provider.Acquire] creates one pod per lease (named outpost-<16 hex>) and
// waits until its container runs:
//
//   - the container's main process creates the home and sleeps; the pod
//     shares its process namespace, so the pause process is PID 1 and reaps
//     the orphans of exec'd commands;
//   - a non-root user (Spec.User, else Options.User, else [DefaultUser];
//     uid 0 is refused), runAsNonRoot, allowPrivilegeEscalation false,
//     privileged false, all capabilities dropped, seccomp RuntimeDefault;
//   - no service account token (automountServiceAccountToken false) and no
//     service environment variables (enableServiceLinks false);
//   - a read-only root filesystem; what the lease can write is a private
//     home at [Home] (mode 0700) on a memory-backed emptyDir
//     (Options.HomeBytes, [DefaultHomeBytes], counted against the memory
//     limit), [Tmp] (Options.TmpBytes, [DefaultTmpBytes]: the copied CLI,
//     caches) and the workspace at [Root] (/workspace, the working
//     directory; Options.WorkspaceBytes, [DefaultWorkspaceBytes]), both
//     disk-backed emptyDirs with size limits (the kubelet evicts a pod
//     whose volume outgrows its limit);
//   - CPU and memory limits: Spec.CPUs and Spec.MemoryBytes, else
//     Options.CPUs and Options.MemoryBytes, else [DefaultCPUs] (2) and
//     [DefaultMemoryBytes] (4 GiB), the Docker provider's defaults
//     (negative Options: no limit); small requests ([DefaultCPURequest],
//     [DefaultMemoryRequestBytes], capped at the limits), so a small node
//     runs several leases; an ephemeral-storage limit covering the volumes
//     (Options.EphemeralStorageBytes);
//   - the pids limit: Kubernetes has none per container; the kubelet of
//     each node limits every pod (podPidsLimit). Once the pod runs, the
//     provider reads the kubelet configuration of its node
//     ([Provider.NodePidsLimit]) and refuses the lease with a configuration
//     error when the node's limit is not the one asked for (Spec.Pids, else
//     Options.Pids, else [DefaultPids]), when the node has none, or when
//     its configuration cannot be read; Options.Pids negative asks for no
//     limit and checks nothing;
//   - an owner reference to the provider's runner Job, which the cluster
//     deletes, and the pod and its Secret with it, when the provider's
//     process stops renewing it (see Cleanup);
//   - activeDeadlineSeconds (Options.Lifetime) as the backstop for a lease
//     nobody releases, restartPolicy Never, image pull policy
//     Options.PullPolicy (IfNotPresent unless set);
//   - the network: Spec.Network, else Options.Network: "pod" (or "bridge")
//     is the cluster's pod network, "host" the node's network namespace
//     (hostNetwork, for a server on the node's loopback); nothing else;
//   - Spec.Hide directories are never copied into the pod and never written
//     back from it; Spec.Forwards are refused (a pod cannot reach this
//     machine's unix sockets);
//   - Spec.Mounts are refused: a pod cannot see this machine's directories;
//     copy files in with CopyIn instead;
//   - labels (see [LabelManaged] and friends, the Docker provider's set
//     under outpost.dev/) on the pod and its Secret, and a heartbeat
//     annotation ([AnnotationHeartbeat]) refreshed while the lease lives.
//
// The wait for the pod is bounded by Options.StartTimeout and classified:
// an image that is missing and may not be pulled, cannot be pulled or is
// invalid, a container that cannot start, a pod that is deleted, evicted or
// fails, an API server that stops answering fail at once; an unschedulable
// pod fails at the timeout with the scheduler's message. All are
// [outposterr.Sandbox] errors, and the pod and Secret are removed.
//
// # Secrets
//
// Spec.Env values never appear in the pod spec: they go into a per-lease
// Secret (outpost-<16 hex>-env, immutable, owned by the pod so the cluster
// deletes it with the pod), which the container references with envFrom;
// Release deletes it. Command.Env values travel in the exec's standard
// input: a header that the exec wrapper reads before the command's own
// input and turns into exported variables, so they are in no argv, no pod
// spec and no Secret. Credential files go through CopyIn into the home.
//
// # Sidecars
//
// [Provider.AcquireWithSidecar] adds a second container to the pod that
// runs a program of the caller's beside the lease ([Sidecar]): it shares
// the pod's network, so the lease reaches it on 127.0.0.1, and nothing
// else — its own volume, another user ([DefaultSidecarUser]; the pod's
// process namespace is shared, and only another uid keeps the lease out of
// the sidecar's /proc entries), a read-only root, no capabilities. The
// program is copied in once the pod runs — unless the image holds the same
// file, by SHA-256, at Sidecar.Baked: then that copy runs — and started
// through exec while the lease's workspace is copied in and, as the lease
// is returned without waiting for it, while the caller goes on (copies a
// CLI in); its standard streams wait for that start
// ([SidecarConn.Started]) and stay connected to the caller
// ([SidecarStreams]) until Release. Outpost runs its model gateway there, and hands it each turn's
// credential over its standard input. A lease whose sidecar program could
// not start, or ended before Release, is gone ([sandbox.GoneReason]): a
// pool hands out another, and a turn that failed in it is the sandbox's.
//
// # Processes
//
// [sandbox.Sandbox.Exec] runs a fixed sh wrapper through the pods/exec
// subresource (the WebSocket executor, SPDY when the API server cannot
// upgrade), with the command's argv as positional parameters, never a
// string. The wrapper reads the header, enters the working directory, starts
// the command in a new session (its own process group; coreutils env resets
// the SIGINT and SIGQUIT that sh ignores for background jobs), records its
// pid in /tmp/outpost-<id>.pid, waits for it and writes an exit marker on
// stderr, which the provider takes out of the stream. Wait returns at the
// marker, so a grandchild holding stdout open does not hold Wait; a command
// killed by signal n reports 128+n, which is read as that signal. The
// marker also counts out-of-memory kills in the container's cgroup, which
// sets ExitStatus.OOMKilled; so does a lease container that the memory
// limit ended (its status says OOMKilled), for every process it ran. A
// process also implements [sandbox.LimitReporter]: it reports
// [sandbox.LimitPids] when the container's count of forks refused at the
// pod's pids limit rose (pids/pids.events on cgroup v1; on cgroup v2 the
// container's pids.events counts them only when the node mounts cgroup2
// with pids_localevents, otherwise a reached limit is not reported).
// [sandbox.Process.Signal], Close and context
// cancellation run a short second exec that signals the whole group (a
// cancellation arriving before the pid was written leaves a marker the
// wrapper honours). The exec stream outlives the caller's context, so a
// cancelled command still reports its status (SIGKILL, no error).
//
// A pod that is deleted, evicted or ends fails every running process of the
// lease at once with a sandbox error (the provider watches the pod); a
// broken stream is classified by asking for the pod: deleted, or the API
// server unreachable.
//
// The image needs POSIX sh, coreutils (env with --default-signal for
// SIGINT delivery, sleep, mkdir), setsid (util-linux), tar and find; the
// base image has them all.
//
// # Files and the workspace
//
// CopyIn and CopyOut run tar in the pod as the lease user, through the
// exec's standard input and output, with the Docker provider's rules:
// destinations are absolute, clean paths; CopyIn checks the archive entry by
// entry and refuses absolute names, ".." components, symbolic links that are
// absolute or lead outside the destination, hard links to such names and
// special files, killing the extraction at the first one.
//
// A pod cannot mount Spec.Workspace, so the workspace is copied: in at
// Acquire (directories, regular files and links as they are), and back to
// the host directory when a process the caller executes ends having changed
// something under Root (the wrapper checks; the sync runs before Wait
// returns): the entries that changed in the pod since the last sync, and
// deletions of paths the pod had reported before. What comes back is
// hostile input: names are checked, nothing is written through a link or
// outside the directory, absolute or escaping links are not recreated, and
// one sync is bounded by Options.MaxSyncBytes. A sync that fails is sent
// again, whole, by the next one. Changes made on the host
// during the lease are not seen by the pod. Without Spec.Workspace, Root is
// an empty directory and nothing is synced.
//
// # Timeouts
//
// Every control call (create, get, patch, delete, the signalling exec) runs
// under Options.OpTimeout; exec streams last as long as their process.
// Release deletes the pod with no grace period and the Secret under
// context.WithoutCancel plus Options.ReleaseTimeout, treats "not found" as
// success and joins errors.
//
// # Cleanup
//
// A lease dies with the process that holds it, even one killed with
// SIGKILL. On its first Acquire the provider creates a runner Job
// (outpost-runner-<16 hex>, batch/v1) that never runs a pod: it holds an
// active deadline Options.RunnerGrace ([DefaultRunnerGrace], 30 s) ahead,
// which the provider pushes forward every sixth of that, and
// ttlSecondsAfterFinished 0. Every pod names the Job as its owner. When the
// process dies, the deadline passes, the Job controller fails the Job, the
// TTL controller deletes it and the garbage collector deletes its pods and
// their Secrets: within about 35 s of the death (30 s and a few), with
// nobody running `outpost gc`. [Provider.Close] deletes the Job at once,
// and with it the pods of leases not released.
// The kubeconfig user needs to create, patch and delete Jobs in the
// namespace; where it may not, the provider logs a warning and leases live
// until Release, `outpost gc` or Options.Lifetime. A process that cannot
// reach the API server for longer than the grace loses its leases.
//
// [Provider.Reap] (outpost gc) removes labelled pods and Secrets whose owning process
// is gone, and those of owners on other hosts whose heartbeat is older than
// [ReapOptions].Grace, in every namespace the client may list. A Provider
// tracks its live leases: [Provider.ReleaseAll] removes them all,
// [sandbox.CleanupOnSignal] calls it when the process receives SIGINT, SIGTERM, SIGHUP
// or SIGQUIT, and [Provider.Close] stops their background watches and
// heartbeats and deletes the runner Job (so what was not released goes
// with it).
//
// # Images
//
// The provider never builds or loads images. A single-node cluster of this
// machine (scripts/kube-setup.sh) has the base image imported into its
// runtime; on other clusters push it to a registry the nodes can pull from
// and set Options.Image (and Options.ImagePullSecrets).
package kubernetes
