// Package docker is the Docker [sandbox.Provider]: every lease is one
// hardened container on the Docker Engine API (github.com/docker/docker/client,
// API version negotiated, so the Debian engine's 1.41 works). It is the only
// package of Outpost that imports the Docker SDK, and it never runs the docker
// binary itself (an ssh:// engine runs it on the far side, see below).
//
// # Engines
//
// Any engine that speaks the Docker API will do; [Endpoint] says where it is:
//
//   - the local dockerd (the default socket, or a unix:// Host);
//   - Podman's Docker-compatible service (podman system service), by its
//     unix socket. The provider tells Podman from the ping headers
//     ([Provider.Engine]) and adapts: the home tmpfs is owned through Podman's
//     "U" option (it refuses uid=/gid=); an exec's exit is decided with the
//     wrapper's pid file where Podman's inspect cannot tell "not started yet"
//     from "exited 0"; Close always kills the rest of the group, because
//     Podman ends the output stream when the main process exits even while a
//     grandchild holds it; an out-of-memory kill is read from the lease's
//     memory cgroup counter (Podman sends no event for exec'd processes).
//     --init needs Podman's catatonit. Images live in Podman's own storage:
//     load the base image with `docker save outpost/base:dev | podman load`
//     (it is then localhost/outpost/base:dev, which the short name finds);
//   - a remote Docker engine: ssh://[user@]host[:port] through the docker
//     command's connection helper (each connection is an ssh process that
//     runs `docker system dial-stdio` on the far side, so the ssh user needs
//     the docker command and access to the engine there; Endpoint.SSHFlags
//     adds ssh arguments, ssh's own configuration applies), or tcp:// with
//     TLS ([TLS], [TLSFromDir]; the engine's certificate is always verified).
//
// # Local and remote engines
//
// Bind mounts name paths of the machine the engine runs on, so they mean
// something only for an engine on this machine. [Endpoint.Local] decides by
// the address: a unix socket or a tcp:// loopback address is local; ssh://
// (even to 127.0.0.1) and tcp:// to another host are not, and Options.Remote
// declares a local-looking address remote (a tunnel). A lease of an engine
// that is not local ([Provider.Local] false) binds nothing of this machine:
//
//   - a Spec.Workspace is refused with a configuration error, as are
//     Spec.Mounts and Spec.Forwards; Spec.Hide has nothing to hide;
//   - the workspace at [Root] is a fresh tmpfs owned by the lease user (mode
//     0755). It is memory: its contents count against Spec.MemoryBytes. Put
//     files there with CopyIn and take results out with CopyOut;
//   - the default user is [DefaultUser], the image's account: this machine's
//     ids mean nothing there;
//   - a CLI reaches the lease by copy (bootstrap's CopyInProvider), not by a
//     mount of this machine's cache.
//
// Podman on this machine is local: it bind-mounts like Docker (rootful, or
// rootless for files its user may read).
//
// # Leases
//
// [Provider.Acquire] creates and starts one container per lease:
//
//   - a keeper as the main process behind Docker's init (--init), so exec'd
//     processes and their orphans are reaped. The keeper reads its standard
//     input, to which the provider stays attached until Release (see
//     Cleanup), and ends when it ends. On Docker it also runs the lease's
//     first command itself (see Processes);
//   - a non-root user: Spec.User, else Options.User, else the host's uid:gid;
//     when the host process is root, [DefaultUser] (the image's "agent"
//     account, 1000:1000) — a root CLI is refused by some agents and has no
//     place in a sandbox. The provider honours an explicit "0:0" (its own
//     tests use it on root hosts); the outpost command and outpost.Runner
//     refuse a root lease user;
//   - all capabilities dropped, no-new-privileges;
//   - a read-only root filesystem: the image cannot be changed. The agent
//     writes to the workspace, its home and /tmp only. The pinned Claude
//     Code, Codex and Copilot CLI live with that (a `docker diff` of a
//     writable lease after a tool-using turn of each lists only the
//     engine's mount points); Antigravity has not been checked (it has no
//     offline endpoint);
//   - a private tmpfs home at [Home] (mode 0700, owned by the user, exec
//     allowed because CLIs unpack native add-ons there; [DefaultHomeBytes])
//     and a tmpfs [Tmp] (mode 1777, [DefaultTmpBytes]), where XDG_CACHE_HOME
//     points and each exec's pid file lives;
//   - the workspace bind-mounted read-write at [Root] (/workspace), which is
//     also the working directory. An empty Spec.Workspace gets a fresh host
//     temporary directory owned by the lease and removed by Release (a
//     remote engine's lease gets a tmpfs instead, see below);
//   - each Spec.Hide directory of the workspace covered by an empty read-only
//     tmpfs, so the lease neither reads nor creates anything there (a missing
//     one is created empty, owned like the workspace; a link is refused);
//   - Spec.Mounts as extra bind mounts, always read-only (the contract calls
//     them read-only; Mount.ReadOnly=false does not make them writable);
//   - CPU, memory (swap disabled: memory+swap = memory) and pids limits on
//     every lease: Spec's, else Options', else [DefaultCPUs] (2),
//     [DefaultMemoryBytes] (4 GiB, which the tmpfs home and /tmp count
//     against) and [DefaultPids] (1024 processes and threads: the pinned
//     CLIs peak at about 30 during a tool-using turn; a fork bomb stops at
//     the limit and the rest of the host is untouched). Negative Options
//     values remove a limit;
//   - a network mode: Spec.Network, else Options.Network, else "bridge".
//     "bridge" is the default because an agent CLI must reach its model API;
//     "none" isolates completely, "host" shares the host's network (tests
//     use it to reach a loopback model server), any other name is a
//     user-defined network that must exist. "container:<id>" is refused;
//   - Spec.Forwards: each host unix socket is bind-mounted read-only under
//     [ForwardDir] (connecting to a socket needs no write access) and a
//     socat started with the container, as the lease user, listens on the
//     lease's own 127.0.0.1:Port and relays to it; a forwarder that dies is
//     restarted a second later, and all of them end with the container.
//     Acquire returns once every port listens (an image without socat is a
//     sandbox error); the entrypoint reports that on its standard output,
//     which the provider reads on the lifeline's attach, so readiness
//     costs no exec. With network "none" this is how a lease reaches a
//     model gateway with no route anywhere; network "host" is refused (the
//     port would be the host's). The container's entrypoint is then the
//     forwarding script, which then becomes the keeper;
//   - environment: only HOME, TZ and XDG_CACHE_HOME in the container
//     configuration. Spec.Env and Command.Env travel in each exec's
//     environment, so no secret value is visible in the container's config or
//     any argv;
//   - labels (see [LabelManaged] and friends) on every container; the Docker
//     socket is never mounted.
//
// # Processes
//
// [sandbox.Sandbox.Exec] creates an exec whose argv is a fixed sh wrapper
// followed by the command's own argv as positional parameters (never
// concatenated into a string). The wrapper writes its pid to
// /tmp/outpost-<id>.pid, kills itself if the process was cancelled before
// it started, makes sure it leads its own process group (the engine already
// starts exec'd processes as session leaders; otherwise the wrapper uses
// setsid, which then does not fork) and execs the command, which therefore
// keeps that pid. The engine does not forward signals to exec'd processes, so
// [sandbox.Process.Signal], Close and context cancellation run a short second
// exec, as the same user, that signals the whole group: kill -SIG -- -pgid.
//
// Output is demultiplexed (stdcopy) into buffered pipes. Wait does not depend
// on the output streams: it inspects the exec when the attach stream ends and
// otherwise with a bounded backoff (at most one inspect per second), so a
// grandchild that keeps stdout open cannot hang a turn. The engine closes
// such a stream itself about two seconds after the main process exited —
// and, while it is held, delays the exit of the container's later execs by
// as much, which is one more reason Close kills the rest of the group.
//
// The engine reports a process killed by signal n as exit code 128+n, so
// codes 129..159 are reported as that signal (Code -1, Signal "SIGKILL"...),
// also when a program chose such a code itself. A process ended by the
// caller's context or by Release reports SIGKILL and Wait returns no error:
// the error of Wait is reserved for failures to observe the process. An
// out-of-memory kill is detected from the container's "oom" event after this
// exec's own "exec_start" event (cgroup v1 engines do not set
// State.OOMKilled while the container keeps running), or from its State.
// Each exec leaves a pid file of a few bytes in the container's /tmp.
//
// On Docker a lease's first command is not an exec: the keeper runs it, so a
// cold turn costs what `docker run` costs, whose command is the container's
// own process. The provider writes the command (the same wrapper, argv,
// environment, directory and user; its stdin, up to 256 KiB of text) as
// quoted shell on the lifeline; the keeper runs it while a watcher holds
// the lifeline (its end still ends the container), and its output comes
// back on the container's streams, which the lifeline's attach carries.
// Two lines with a random nonce the command is never given end its output and
// report its status, and whether something of its group still holds its
// output (Close kills the group then, as after an exec). Signals, Close,
// cancellation and the out-of-memory check work as for an exec. A command
// that keeps its stdin open, a larger or binary stdin, and every later
// command are execs; so is every command on Podman.
//
// # Files
//
// CopyIn and CopyOut run tar inside the running container as the lease user
// (tar must be in the image; it is in the base image). The engine's archive
// endpoints cannot be used: they work on the container's root filesystem from
// outside and do not see the tmpfs home. Modes are preserved, ownership is the
// lease user's, destinations must be absolute, clean paths. CopyIn re-checks
// the archive entry by entry on its way in and refuses absolute names, ".."
// components, symbolic links that are absolute or lead outside the
// destination, hard links to such names and special files; at the first one
// the extraction is killed and CopyIn fails with a configuration error.
//
// # Root hosts
//
// When Outpost runs as root, leases default to [DefaultUser], which cannot
// enter a root-owned 0700 workspace (t.TempDir, a root checkout). Make the
// workspace accessible to [DefaultUser], or give the lease the workspace
// owner's ids. The engine the outpost command opens (sandbox.Kind Open)
// does the latter for a workspace of another user, and for one of root's
// leases a copy owned by the lease user that is written back into the
// workspace at release (owners kept; package internal/wscopy). The copy
// records its runner: [ReapCopies] (outpost gc, and the next open as root)
// removes one a runner killed with SIGKILL left. A provider
// given Spec.User "0:0" runs the lease as root, still without capabilities
// and with no-new-privileges; the outpost command refuses that.
//
// # Timeouts
//
// Two regimes, as in Nomad's docker driver: every control call (create,
// start, inspect, exec-create, the signalling exec) runs under
// Options.OpTimeout (default 30 s); attach streams use the caller's context
// (the turn). Release runs under context.WithoutCancel plus
// Options.ReleaseTimeout (default 30 s), treats "not found" as success and
// joins errors.
//
// # Cleanup
//
// A lease dies with the process that holds it, even one killed with
// SIGKILL. Each container is created with an open standard input that the
// engine closes when its one attached client goes away (StdinOnce), and
// with AutoRemove. Acquire attaches to it while the container starts (so
// the lease costs no time more) and holds that connection, writing
// nothing, until Release. When the process dies, the kernel closes the
// connection (through ssh:// too: the ssh process's input ends and it
// closes the far side's), the engine closes the keeper's input, the keeper
// exits, the container's other processes end with it and the engine
// removes the container — within a second or so, on Docker and on Podman,
// with nobody running `outpost gc`. Release ends a Docker lease the same
// way, which spares the turn the kill of a forced removal: it cuts the
// lifeline and returns once the container has stopped (nothing of the
// lease runs any more, the workspace is no longer written); the engine
// then removes the stopped container by itself, which the provider
// follows in the background ([Provider.Removing]) and which
// [Provider.AwaitRemovals], [Provider.ReleaseAll] and [Provider.Close]
// wait for. A container that has not stopped two seconds after the cut,
// or is not removed two seconds after its stop, and every Podman lease,
// is removed by force (a Podman lease is gone when Release returns).
//
// Every resource carries [LabelManaged], [LabelRun], [LabelSession] (when
// given), [LabelVersion], [LabelOwnerPID], [LabelOwnerHost],
// [LabelOwnerStart] and [LabelOwnerPIDNS]. [Reap] (outpost gc) removes labelled containers, volumes
// and networks whose owning process is gone: what the lifeline cannot
// remove (a container created by a process that died before it attached,
// or left by an engine that was down). A Provider also tracks its live
// leases: [Provider.ReleaseAll] removes them all, and [sandbox.CleanupOnSignal] calls
// it when the process receives SIGINT, SIGTERM, SIGHUP or SIGQUIT.
//
// # Image
//
// [DefaultImage] (outpost/base:dev) is built from .outpost/Dockerfile by
// scripts/docker-setup.sh or [BuildImage]. The provider never pulls: no
// registry is assumed to be reachable.
package docker
