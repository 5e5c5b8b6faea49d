package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// A lease runs commands in one hardened pod until it is released.
func Example() {
	ctx := context.Background()
	p, err := kubernetes.New(ctx, kubernetes.Options{
		Kubeconfig: "/var/lib/outpost-kube/admin.kubeconfig", // what the CLI resolves from KUBECONFIG or a flag
		Namespace:  "default",
		Version:    "1.0.0",
	})
	if err != nil {
		fmt.Println(err) // a sandbox error: "kubernetes API server unreachable at ..."
		return
	}
	defer p.Close()
	// Remove every live lease if the process is interrupted.
	stop := sandbox.CleanupOnSignal(p.ReleaseAll, 0, nil)
	defer stop()

	sb, err := p.Acquire(ctx, sandbox.Spec{
		Workspace:   ".", // copied into /workspace, changes synced back after each command
		Env:         map[string]string{"API_KEY": "kept in a per-lease Secret"},
		CPUs:        1,
		MemoryBytes: 1 << 30,
		Labels:      map[string]string{"session": "demo"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Release(ctx)

	proc, err := sb.Exec(ctx, sandbox.Command{
		Args: []string{"sh", "-c", `echo "hello from $(id -un)" > hello.txt && cat hello.txt`},
		Env:  map[string]string{"TOKEN": "sent on stdin, never in argv or the pod"},
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

// Reap removes the pods and Secrets that dead outpost processes left behind
// (outpost gc).
func ExampleProvider_Reap() {
	ctx := context.Background()
	p, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: "/var/lib/outpost-kube/admin.kubeconfig"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	left, err := p.Reap(ctx, kubernetes.ReapOptions{ReapOptions: sandbox.ReapOptions{DryRun: true, Grace: 30 * time.Minute}})
	for _, l := range left {
		fmt.Println(l.Kind, l.Namespace+"/"+l.Name, l.Reason)
	}
	if err != nil {
		fmt.Println(err)
	}
}
