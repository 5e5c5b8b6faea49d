package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

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
CLIs can run whole turns with no account and no network. It prints the URL and the
environment that points Claude Code at it, then serves until interrupted.

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
			return runStubModel(cmd.Context(), opts)
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

func runStubModel(ctx context.Context, opts *StubModelOptions) error {
	sc, _ := outposttest.ParseScenario(opts.Scenario)
	srv, err := outposttest.NewServer(outposttest.WithAddr(opts.Addr), outposttest.WithScenario(sc),
		outposttest.WithAnswers(opts.Answers...))
	if err != nil {
		return &flagError{err}
	}
	defer srv.Close()
	fmt.Fprintf(opts.IO.Out, "scripted model server listening on %s (scenario %s)\n", srv.URL(), sc)
	env := outposttest.ClaudeEnv(srv)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(opts.IO.Out, "export %s=%s\n", k, env[k])
	}
	// Codex reads its endpoint from -c overrides and the key from env_key.
	for k, v := range outposttest.CodexEnv(srv) {
		fmt.Fprintf(opts.IO.Out, "export %s=%s\n", k, v)
	}
	fmt.Fprintf(opts.IO.Out, "# codex %s exec --json -\n", strings.Join(outposttest.CodexArgs(srv, 1), " "))
	// Copilot CLI (BYOK, Chat Completions) reads only variables. Its cache
	// directory is left alone: a shell's default one is writable.
	cp := outposttest.CopilotEnv(srv)
	delete(cp, "XDG_CACHE_HOME")
	ckeys := make([]string, 0, len(cp))
	for k := range cp {
		ckeys = append(ckeys, k)
	}
	sort.Strings(ckeys)
	for _, k := range ckeys {
		fmt.Fprintf(opts.IO.Out, "export %s=%s\n", k, cp[k])
	}
	fmt.Fprintf(opts.IO.Out, "# copilot --output-format json --allow-all --no-ask-user\n")
	<-ctx.Done()
	return nil
}
