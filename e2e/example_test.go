// Code below is kept identical to the README's library example.

package e2e_test

import (
	"context"
	"fmt"
	"os"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// Example_library is the README's library example, compiled with the tests
// so it cannot rot.
func Example_library() {
	// A scripted model server on loopback; drop it and the Endpoint to use a real account.
	srv, err := outposttest.NewServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: claude.New(),
		Input: adapters.Input{
			Prompt:   "Say hello MARK-lib",
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey},
		},
		Provider: host.New(host.Options{Env: map[string]string{"PATH": os.Getenv("PATH")}}),
		OnEvent:  func(ev adapters.Event) { fmt.Println(ev.Kind, ev.Text) },
	})
	switch {
	case outposterr.IsQuota(err):
		reset, _ := outposterr.ResetAt(err)
		fmt.Println("quota; wait until", reset)
	case outposterr.IsUnavailable(err):
		fmt.Println("outage; retry later:", outposterr.UnavailableReason(err))
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println(res.Text, res.Conversation, res.Usage.Input, res.Usage.CostUSD)
	}
}
