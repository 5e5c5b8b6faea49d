package docker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// A lease runs commands in one hardened container until it is released.
func Example() {
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Options{Version: "1.0.0"})
	if err != nil {
		fmt.Println(err) // a sandbox error: "... (is dockerd running? start it or use --sandbox host)"
		return
	}
	defer p.Close()
	// Remove every live lease if the process is interrupted.
	stop := sandbox.CleanupOnSignal(p.ReleaseAll, 0, nil)
	defer stop()

	sb, err := p.Acquire(ctx, sandbox.Spec{Network: "none", MemoryBytes: 512 << 20, Labels: map[string]string{"session": "demo"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Release(ctx)

	proc, err := sb.Exec(ctx, sandbox.Command{
		Args: []string{"sh", "-c", `echo "hello from $(id -un)"`},
		Env:  map[string]string{"API_KEY": "never in argv"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer proc.Close()
	go func() { _, _ = io.Copy(os.Stderr, proc.Stderr()) }()
	out, _ := io.ReadAll(proc.Stdout())
	st, err := proc.Wait()
	fmt.Printf("%s%v %v\n", out, st, err)
}

// Reap removes what dead outpost processes left behind (outpost gc).
func ExampleReap() {
	cli, err := docker.NewClient("")
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := docker.Reap(ctx, cli, docker.ReapOptions{DryRun: true})
	for _, l := range left {
		fmt.Println(l.Kind, l.Name, l.Reason)
	}
	if err != nil {
		fmt.Println(err)
	}
}

// Signal reaches the command and everything it started.
func ExampleProvider_Acquire_signal() {
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Options{})
	if err != nil {
		return
	}
	defer p.Close()
	sb, err := p.Acquire(ctx, sandbox.Spec{})
	if err != nil {
		return
	}
	defer sb.Release(ctx)
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "sleep 60 & sleep 60"}})
	if err != nil {
		return
	}
	defer proc.Close()
	_ = proc.Signal(syscall.SIGTERM) // both sleeps and the shell
	st, _ := proc.Wait()
	fmt.Println(st) // killed by SIGTERM
}
