package outpost_test

import (
	"context"
	"fmt"
	"os"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/outposterr"
)

// Example runs one real Claude Code turn offline on this machine: the
// pinned CLI is bootstrapped (downloaded once from npm's configured
// registry, verified against its SHA-512, cached) and answers through the
// scripted model server. Drop Offline and set Auth to use a real account;
// leave Sandbox empty for a Docker lease.
func Example() {
	ctx := context.Background()
	project, _ := os.MkdirTemp("", "project") // where the agent works
	defer os.RemoveAll(project)
	// Offline: the real Claude Code CLI answers through the scripted model server.
	// Drop Offline and set Auth for a real account; leave Sandbox empty for Docker.
	r, err := outpost.New(ctx, outpost.Options{Project: project, Offline: true, NoStore: true, Getenv: os.Getenv,
		Sandbox: outpost.SandboxOptions{Kind: "host"}})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	res, err := r.Run(ctx, outpost.Turn{Agent: "claude", Prompt: "Say hello MARK-lib"})
	switch {
	case outposterr.IsQuota(err):
		reset, _ := outposterr.ResetAt(err)
		fmt.Println("quota; wait until", reset)
	case outposterr.IsUnavailable(err):
		fmt.Println("outage; retry later:", outposterr.UnavailableReason(err))
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println(res.Text)
	}
	// Output: outpost ok: MARK-lib.
}
