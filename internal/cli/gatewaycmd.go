package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/gateway"
)

// GatewaySidecarOptions are the flags of `outpost gateway sidecar`.
type GatewaySidecarOptions struct {
	IO        IOStreams
	Listen    string
	Upstreams []string
	Verbose   bool
}

// newCmdGateway builds `outpost gateway`, whose one subcommand is the model
// gateway a Kubernetes pod runs beside its lease. Outpost starts it itself;
// it is not meant to be typed.
func newCmdGateway(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:    "gateway",
		Short:  "The model gateway's own commands (run by outpost in a pod's sidecar)",
		Hidden: true,
		Args:   exactArgs(0),
	}
	opts := &GatewaySidecarOptions{IO: f.IO}
	sidecar := &cobra.Command{
		Use:   "sidecar --upstream URL... [--listen 127.0.0.1:0]",
		Short: "Serve the model gateway on loopback, driven over standard input and output",
		Long: `gateway sidecar serves the model gateway on a loopback address and takes its
grants (the real credentials) over standard input, one JSON request per line,
answering on standard output; it ends when its input does. outpost runs it in a
second container of each Kubernetes lease, so the lease reaches the gateway on the
pod's loopback and never sees the credential.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGatewaySidecar(cmd.Context(), opts)
		},
	}
	sidecar.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:0", "loopback address to serve on")
	sidecar.Flags().StringArrayVar(&opts.Upstreams, "upstream", nil, "an upstream base URL grants may use (repeatable)")
	sidecar.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "log each exchange to standard error (never a credential)")
	root.AddCommand(sidecar)
	return root
}

func runGatewaySidecar(ctx context.Context, opts *GatewaySidecarOptions) error {
	log := slog.New(slog.DiscardHandler)
	if opts.Verbose {
		log = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	gw, err := gateway.New(gateway.Options{Upstreams: opts.Upstreams, Logger: log})
	if err != nil {
		return &flagError{err}
	}
	defer gw.Close()
	if _, err := gw.ListenTCP(opts.Listen); err != nil {
		return &flagError{err}
	}
	return gw.ServeControl(ctx, opts.IO.In, opts.IO.Out)
}
