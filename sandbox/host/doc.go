// Package host runs sandbox commands directly on the local machine.
//
// # This is not a sandbox
//
// The host provider is UNISOLATED. Every command runs as the current user,
// with that user's privileges, network, and access to every file, socket and
// process the user can reach. A CLI started here can read your SSH keys, your
// cloud credentials and any repository on disk, and can kill your processes.
// Use it only for agents and prompts you would run in your own terminal, or
// when the machine itself is the sandbox (a throw-away CI runner or a
// container you started for the purpose).
//
// What the provider does give each lease:
//
//   - a private home directory (mode 0700, removed by Release), so the CLI's
//     configuration, logins and session files do not mix with yours, unless
//     [sandbox.Spec.RealHome] asks for the real one ([Options.RealHome]). It
//     lives in a lease directory ([LeasePrefix]* in Options.TempDir) that
//     records its owning process (pid, host, start time): [Provider.ReleaseAll]
//     removes every lease still held (the outpost command calls it on the way
//     out, signals included), and [Reap] removes the directories of owners
//     that died without releasing them (kill -9, a crash), never following
//     a link and never touching another user's. The host kind runs it when
//     it opens (the next outpost command on the host sandbox removes what a
//     dead run of this host left); outpost gc runs it too, and also removes
//     directories whose owner cannot be judged here once they are old. The
//     processes a dead run started are not ended: they are not in a
//     sandbox, and whatever daemonized escapes any group anyway;
//   - a workspace: [sandbox.Spec.Workspace] as given (never removed), or a
//     fresh temporary directory removed by Release;
//   - an environment built only from [Options.Env], HOME and PWD, the
//     lease's Spec.Env and the command's Env, in that order, later values
//     winning (an explicit HOME in Spec.Env or Command.Env is honoured). The
//     provider never reads its own process environment; credentials travel as
//     variables only and never in argv;
//   - process-group supervision: each command leads its own session and
//     process group (setsid), so [sandbox.Process.Signal], Close, cancellation
//     of the Exec context and Release reach every child it spawned that stayed
//     in the group. A child that starts its own session (daemonizes) escapes
//     the group and outlives the lease; only a real sandbox can prevent that.
//
// Spec fields that describe containers are handled honestly: Image, Labels,
// CPUs, MemoryBytes and Pids are ignored (there is no container to label or
// limit), while Network (other than "" and "host"), User, Mounts and Forwards
// are configuration errors, because silently dropping them would run the CLI
// with access the caller explicitly ruled out (or, for Forwards, point it at
// whatever listens on the host's own loopback port).
//
// Sandbox paths are host paths. CopyIn extracts into any absolute directory
// that exists, refusing entries with absolute names, ".." components, links
// that escape the directory, writes through symlinks that lead out of it, and
// any entry type other than regular files, directories and symbolic links; it
// makes no attempt to be atomic (entries before a refused one stay). CopyOut
// streams a file or directory tree without following symbolic links.
//
// Errors carry [github.com/outpost-dev/outpost/outposterr] classes: invalid
// commands, specs and archives are configuration errors, failures to start or
// supervise a process and file system failures are sandbox errors.
package host
