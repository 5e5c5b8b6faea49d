// Package outpost runs coding-agent CLIs (Claude Code, Codex, GitHub Copilot
// CLI, Google Antigravity, spec-defined drivers) headless, one turn at a
// time, in sandboxes, and returns a normalized, classified result. It is
// the library face of the outpost command, which is built on it.
//
// A [Runner] does for a turn or a batch what the command does: it finds the
// agent by name in the registry (package agents) or among the project's
// drivers, plans credentials from the project's declared variables
// (.outpost/.env), bootstraps the pinned CLI once — downloaded, verified
// against its SHA-512, cached on the host — and delivers it into each lease
// the sandbox engine's way (sandbox.Delivery: a read-only mount, a copy
// through the sandbox contract, or the host path), restores
// and captures conversations, and classifies what happened:
//
//	r, err := outpost.New(ctx, outpost.Options{Offline: true, Getenv: os.Getenv})
//	if err != nil { ... }
//	defer r.Close()
//	res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "Say hello"})
//
// Options.Offline starts the scripted model server (package outposttest)
// so a real CLI runs a whole turn with no account and no network. The
// lower layers stay available: package harness runs one turn with an
// adapter and a provider you choose, package batch runs many.
//
// The library never reads the process environment: whatever comes from
// it (forwarded variables, the Docker engine address, npm's registry
// setting, the state directory) is read through Options.Getenv, which the
// outpost command sets to os.Getenv.
//
// Sandbox kinds come from a registry (Options.Sandboxes; nil: package
// sandbox/kinds' built-ins): each kind's package opens its engine, which
// hands out leases and says, as a value (sandbox.Route), how they reach
// the model gateway; this package names no kind.
//
// The model gateway runs in the runner's process for Docker, Podman and
// host leases, and in a sidecar container of each Kubernetes pod when
// SandboxOptions.GatewayBinary names an outpost executable to run there
// (the outpost command passes itself); without one, a pod on this
// machine's network uses the runner's gateway and other pods get the
// credential inside.
package outpost
