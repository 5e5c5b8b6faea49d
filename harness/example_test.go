package harness_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// ExampleRun runs one turn of a CLI (here the fake agent this package's
// tests compile in, scripted by its prompt) in a cold host lease and reads
// the classified result: the CLI reports a quota failure with its reset.
func ExampleRun() {
	exe, _ := os.Executable()
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: fakecli.New(exe),
		Input: adapters.Input{Prompt: `emit {"type":"conversation","id":"c1"}
emit {"type":"quota","status":"rejected","reset":"2026-12-02T15:00:00Z"}
emit {"type":"failure","text":"quota exhausted"}
exit 1`},
		Provider: host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}}),
	})
	reset, _ := outposterr.ResetAt(err)
	fmt.Println(res.Conversation, outposterr.ClassOf(err), reset.UTC().Format("15:04"))
	// Output: c1 quota 15:00
}

// ExampleReplay re-judges a recorded run exactly as a live turn is judged.
func ExampleReplay() {
	rec := harness.Recording{Stdout: stringsReader(`{"type":"conversation","id":"c2"}
{"type":"result","text":"done"}
{"type":"finished","ok":true}
`)}
	res := harness.Replay(context.Background(), fakecli.New("fake"), rec, nil, false)
	fmt.Println(res.OK(), res.Text, res.Counts[adapters.KindResult])
	// Output: true done 1
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
