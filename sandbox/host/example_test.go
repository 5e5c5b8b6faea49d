package host_test

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// The caller decides what the command sees: here only PATH, taken from this
// process's environment (the library itself never reads it).
func ExampleNew() {
	p := host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}})
	ctx := context.Background()
	sb, err := p.Acquire(ctx, sandbox.Spec{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Release(ctx)

	proc, err := sb.Exec(ctx, sandbox.Command{
		Args:  []string{"sh", "-c", `printf '%s, %s\n' "$GREETING" "$(cat)"`},
		Env:   map[string]string{"GREETING": "hello"}, // a value: never in argv
		Stdin: []byte("world"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer proc.Close()
	out, _ := io.ReadAll(proc.Stdout())
	st, _ := proc.Wait()
	fmt.Print(string(out))
	fmt.Println(st)
	// Output:
	// hello, world
	// exit 0
}
