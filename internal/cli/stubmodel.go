package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/shquote"
	"github.com/outpost-dev/outpost/outposttest"
)

// StubModelOptions are the flags of `outpost stub-model`.
type StubModelOptions struct {
	IO       IOStreams
	Addr     string
	Scenario string
	Answers  []string
}

// NewCmdStubModel builds `outpost stub-model`.
func NewCmdStubModel(f *Factory, runF func(context.Context, *StubModelOptions) error) *cobra.Command {
	opts := &StubModelOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "stub-model [--addr 127.0.0.1:PORT] [--scenario NAME] [--answer TEXT]...",
		Short: "Serve the scripted model server (Anthropic Messages API) until interrupted",
		Long: `stub-model serves the scripted model server on a loopback address, so real agent
CLIs can run whole turns with no account and no network. It prints the URL and, for
each agent that can use an endpoint, the environment and command line that point its
CLI at the server, then serves until interrupted.

A prompt can pick its own scenario with the directive [[outpost:scenario=NAME]].
Scenarios: ` + strings.Join(scenarioNames(), ", ") + `.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := outposttest.ParseScenario(opts.Scenario); err != nil {
				return &flagError{err}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runStubModel(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:0", "listen address (loopback)")
	cmd.Flags().StringVar(&opts.Scenario, "scenario", "ok", "default scenario")
	cmd.Flags().StringArrayVar(&opts.Answers, "answer", nil, "the next answers, in order, instead of the ok text (repeatable)")
	return cmd
}

func scenarioNames() []string {
	var out []string
	for _, s := range outposttest.Scenarios {
		out = append(out, string(s))
	}
	return out
}

func runStubModel(ctx context.Context, f *Factory, opts *StubModelOptions) error {
	sc, _ := outposttest.ParseScenario(opts.Scenario)
	srv, err := outposttest.NewServer(outposttest.WithAddr(opts.Addr), outposttest.WithScenario(sc),
		outposttest.WithAnswers(opts.Answers...))
	if err != nil {
		return &flagError{err}
	}
	defer srv.Close()
	fmt.Fprintf(opts.IO.Out, "scripted model server listening on %s (scenario %s)\n", srv.URL(), sc)
	// Each agent's own request says how its CLI reaches an endpoint.
	endpoint := adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}
	for _, row := range f.Agents().All() {
		cmd, err := agents.OfflineCommand(row.New(), endpoint)
		if err != nil {
			continue // no endpoint override (antigravity)
		}
		fmt.Fprintf(opts.IO.Out, "\n# %s\n", row.Name)
		keys := make([]string, 0, len(cmd.Env))
		for k := range cmd.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(opts.IO.Out, "export %s=%s\n", k, shquote.Arg(cmd.Env[k]))
		}
		args := make([]string, len(cmd.Args))
		for i, a := range cmd.Args {
			args[i] = shquote.Arg(a)
		}
		fmt.Fprintf(opts.IO.Out, "# %s   (the prompt on standard input)\n", strings.Join(args, " "))
	}
	<-ctx.Done()
	return nil
}
